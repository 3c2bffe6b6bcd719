package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// idClock makes the ids of this process strictly increasing, even within
// one millisecond (RFC 9562 section 6.2, method 1: a 12-bit counter in
// rand_a). Index keys rely on this to order records created in the same
// second. It is state, not configuration.
var idClock struct {
	mu  sync.Mutex
	ms  int64
	seq uint16
}

// nextIDTick returns the timestamp and counter for a new id. fresh seeds the
// counter at each new millisecond; its top bit is cleared so that at least
// 2048 ids fit in one millisecond before the timestamp is advanced.
func nextIDTick(nowMs int64, fresh uint16) (int64, uint16) {
	idClock.mu.Lock()
	defer idClock.mu.Unlock()
	switch {
	case nowMs > idClock.ms:
		idClock.ms, idClock.seq = nowMs, fresh&0x7ff
	case idClock.seq < 0xfff:
		idClock.seq++
	default:
		idClock.ms++
		idClock.seq = fresh & 0x7ff
	}
	return idClock.ms, idClock.seq
}

// NewID returns a new UUIDv7 in canonical lowercase text form. Ids are
// time-ordered and strictly increasing within a process; the rest is random.
func NewID() string { return formatUUID(newIDBytes()) }

// newIDBytes returns a new id in binary form (binID of a NewID).
func newIDBytes() [16]byte {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes instead)
	ms, seq := nextIDTick(time.Now().UnixMilli(), binary.BigEndian.Uint16(b[6:8]))
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(ms))
	copy(b[0:6], ts[2:8])
	b[6] = 0x70 | byte(seq>>8)&0x0f
	b[7] = byte(seq)
	b[8] = 0x80 | b[8]&0x3f
	return b
}

// NewEventID returns a new webhook event id: "evt_" followed by a NewID.
// It is the one kind of event id, of alert.created deliveries and test
// deliveries alike.
func NewEventID() string { return "evt_" + NewID() }

func formatUUID(b [16]byte) string {
	var s [idLen]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// ValidID reports whether s is a UUID in canonical lowercase text form
// (8-4-4-4-12 hex digits), whatever its version.
func ValidID(s string) bool {
	if len(s) != idLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isLowerHex(c) {
				return false
			}
		}
	}
	return true
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// reportingAlphabet is lowercase base32 (RFC 4648): no 0/1/8/9 to confuse.
const reportingAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// reportingLocalLen gives 60 random bits per address.
const reportingLocalLen = 12

// NewReportingLocal returns 12 random characters of [a-z2-7], the local part
// of a domain's reporting address.
func NewReportingLocal() string {
	var b [reportingLocalLen]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		// 256 is a multiple of 32, so masking keeps every symbol equally likely.
		b[i] = reportingAlphabet[b[i]&31]
	}
	return string(b[:])
}
