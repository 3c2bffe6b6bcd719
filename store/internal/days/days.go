// Package days numbers UTC days and walks the keys the store orders by
// them. Roll-ups are kept under prefix | day [| more], the day big-endian
// in days since 1970, so the days of one domain (or organization) from
// one to another are one range of keys: Scan reads it.
package days

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// Of returns the UTC day of t in days since 1970 (0 for earlier times).
func Of(t time.Time) uint32 {
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return uint32(min(s/86400, math.MaxUint32))
}

// Start returns the first second of day, in UTC.
func Start(day uint32) time.Time { return time.Unix(int64(day)*86400, 0).UTC() }

// Date returns day as the API writes dates: 2026-11-20.
func Date(day uint32) string { return Start(day).Format(time.DateOnly) }

// Key returns prefix | day.
func Key(prefix []byte, day uint32) []byte {
	k := make([]byte, 0, len(prefix)+4)
	return binary.BigEndian.AppendUint32(append(k, prefix...), day)
}

// Scan calls fn with the day, key and value of each key of c's bucket that
// is prefix | day | suffix bytes, for the days from to to, in key order;
// the key and value are bbolt's, valid during the call only. A key of the
// prefix with another length is an error wrapping codec.ErrCorrupt; an
// error of fn is returned as it is.
func Scan(c *bolt.Cursor, prefix []byte, suffix int, from, to uint32, fn func(day uint32, k, v []byte) error) error {
	for k, v := c.Seek(Key(prefix, from)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != len(prefix)+4+suffix {
			return fmt.Errorf("key %x of length %d: %w", k, len(k), codec.ErrCorrupt)
		}
		day := binary.BigEndian.Uint32(k[len(prefix):])
		if day > to {
			break
		}
		if err := fn(day, k, v); err != nil {
			return err
		}
	}
	return nil
}
