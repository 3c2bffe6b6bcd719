package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Sealing roll-ups (issue 25): when the seal job closes a domain-day (the
// rule that seals its records, sealGroup.due without the size trigger),
// it rewrites the day's roll-ups compressed, in one transaction of their
// own: the day roll-up (bucketRollups) in its sealed form
// (reports.AppendSealedDayRollup) and the day's source segments merged
// into one sealed segment 0 (reports.AppendSealedSourceSegment). Readers
// decode both forms, so they see the same sources and sums before and
// after. A late report for a sealed day writes the plain forms again (its
// day roll-up re-encoded, a new plain segment) and is sealed with its
// records by a later run; a day with nothing new is not visited, as the
// job only looks at days with unsealed records. SealOptions.All (dmarcd
// compact) seals every stored day's roll-ups, which also converts a file
// written before sealed roll-ups.

// sealRollupBatchBytes bounds the values one transaction of the All sweep
// rewrites, and sealRollupBatchDays the days it visits.
const (
	sealRollupBatchBytes = 8 << 20
	sealRollupBatchDays  = 256
)

// dayClosed reports whether a day is closed (sealGroup.due's rule, which
// also seals a group that fills a block): the day started DayAge ago and
// no report of it arrived within Quiet (newest is the latest arrival
// seen), or o.All.
func dayClosed(o *SealOptions, day uint32, newest time.Time) bool {
	dayAge, quiet := o.DayAge, o.Quiet
	if dayAge <= 0 {
		dayAge = DefaultSealDayAge
	}
	if quiet <= 0 {
		quiet = DefaultSealQuiet
	}
	return o.All || (!days.Start(day).Add(dayAge).After(o.Now) && !newest.Add(quiet).After(o.Now))
}

// sealGroupRollups seals the roll-ups of g's day when the day is closed.
func sealGroupRollups(bdb *bolt.DB, g *sealGroup, o *SealOptions) error {
	if !dayClosed(o, g.day, g.newest) {
		return nil
	}
	key := rollupKey(g.domainID, g.day)
	// A group whose rows stay (its records being dropped) comes back
	// every run: a sealed day costs it a read, not a write transaction.
	var need bool
	err := bdb.View(func(tx *bolt.Tx) error {
		var err error
		need, err = rollupDayUnsealed(tx, key)
		return err
	})
	if err != nil || !need {
		return err
	}
	return bdb.Update(func(tx *bolt.Tx) error {
		_, err := sealRollupDay(tx, key)
		return err
	})
}

// rollupDayUnsealed reports whether a roll-up of the domain-day key is
// not sealed: its day roll-up plain, or its segments more than one or
// plain.
func rollupDayUnsealed(tx *bolt.Tx, key []byte) (bool, error) {
	if v := tx.Bucket(bucketRollups).Get(key); v != nil && !reports.DayRollupSealed(v) {
		return true, nil
	}
	n, sealed, err := sourceSegmentsState(tx.Bucket(bucketSourceRollups), key)
	return n > 1 || (n == 1 && !sealed), err
}

// sealRollupDay rewrites the roll-ups of the domain-day key
// (rollupKey(domain, day)) in their sealed forms, those not sealed yet,
// and returns how many bytes it wrote.
func sealRollupDay(tx *bolt.Tx, key []byte) (int, error) {
	wrote := 0
	rb := tx.Bucket(bucketRollups)
	if v := rb.Get(key); v != nil && !reports.DayRollupSealed(v) {
		sealed, err := reports.SealDayRollup(v)
		if err != nil {
			return 0, fmt.Errorf("roll-up %x: %w", key, err)
		}
		if err := rb.Put(bytes.Clone(key), sealed); err != nil {
			return 0, err
		}
		wrote += len(sealed)
	}
	sb := tx.Bucket(bucketSourceRollups)
	n, sealed, err := sourceSegmentsState(sb, key)
	if err != nil || n == 0 || (n == 1 && sealed) {
		return wrote, err
	}
	day := reports.DaySources{}
	if err := eachSegment(sb, key, 0, day.Add); err != nil {
		return 0, err
	}
	if _, err := deletePrefix(sb, key, -1); err != nil {
		return 0, err
	}
	seg := reports.AppendSealedSourceSegment(make(codec.Enc, 0, 16*len(day)+64), day)
	if err := sb.Put(sourceSegKey(key, 0), seg); err != nil {
		return 0, err
	}
	return wrote + len(seg), nil
}

// sourceSegmentsState returns how many segments the day prefix has,
// counting no further than 2, and whether the first is sealed: the cheap
// check that spares a sealed day.
func sourceSegmentsState(b *bolt.Bucket, prefix []byte) (n int, firstSealed bool, err error) {
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != len(prefix)+4 {
			return 0, false, fmt.Errorf("source roll-up key of length %d: %w", len(k), errCorrupt)
		}
		if n == 0 {
			firstSealed = reports.SourceSegmentSealed(v)
		}
		n++
		if n > 1 {
			break
		}
	}
	return n, firstSealed, nil
}

// sealAllRollups seals the roll-ups of every stored domain-day not sealed
// yet (SealOptions.All), in transactions of bounded size, stopping between
// them when ctx is done.
func sealAllRollups(ctx context.Context, bdb *bolt.DB) error {
	// The day roll-ups name nearly every day; the source roll-ups'
	// pass catches a day that has only sources.
	for _, bucket := range [][]byte{bucketRollups, bucketSourceRollups} {
		var after []byte
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var todo [][]byte
			err := bdb.View(func(tx *bolt.Tx) error {
				var err error
				todo, after, err = unsealedRollupDays(tx, bucket, after, sealRollupBatchDays)
				return err
			})
			if err != nil {
				return err
			}
			for len(todo) > 0 {
				err := bdb.Update(func(tx *bolt.Tx) error {
					size := 0
					for len(todo) > 0 && size < sealRollupBatchBytes {
						n, err := sealRollupDay(tx, todo[0])
						if err != nil {
							return err
						}
						size += n
						todo = todo[1:]
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			if after == nil {
				break
			}
		}
	}
	return nil
}

// unsealedRollupDays returns up to max day keys (rollupKey) of bucket
// (bucketRollups or bucketSourceRollups), from after on, whose roll-ups
// are not all sealed, and the key the next call starts at (nil at the
// end).
func unsealedRollupDays(tx *bolt.Tx, bucket, after []byte, max int) ([][]byte, []byte, error) {
	c := tx.Bucket(bucket).Cursor()
	want := idLen + 4 // bucketRollups: rollupKey
	if bytes.Equal(bucket, bucketSourceRollups) {
		want += 4 // rollupKey | seq
	}
	var k []byte
	if after == nil {
		k, _ = c.First()
	} else {
		k, _ = c.Seek(after)
	}
	var out [][]byte
	for ; k != nil; k, _ = c.Seek(after) {
		if len(k) != want {
			return nil, nil, fmt.Errorf("roll-up key %x: %w", k, errCorrupt)
		}
		day := bytes.Clone(k[:idLen+4])
		after = prefixEnd(day)
		need, err := rollupDayUnsealed(tx, day)
		if err != nil {
			return nil, nil, err
		}
		if need {
			out = append(out, day)
			if len(out) >= max && after != nil {
				return out, after, nil
			}
		}
		if after == nil {
			break
		}
	}
	return out, nil, nil
}
