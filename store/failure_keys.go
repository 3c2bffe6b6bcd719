package store

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Keys and values of the failure report buckets (declared in schema.go).
//
//	failure_reports            id -> reports.AppendFailure
//	failure_headers            id -> reports.AppendFailureHeaders (absent: no headers)
//	failure_reports_by_org     org | arrival | id -> failIndexValue
//	failure_reports_by_domain  domain | arrival | id -> failIndexValue
//	failure_dedup              domain | identity hash -> id
//	failure_rollups            org | UTC day | domain -> reports.AppendFailureDay
//
// arrival is big-endian Unix seconds, day big-endian days since 1970, so
// that an organization's (or a domain's) reports are a range sorted by
// arrival date, and its days a range sorted by day.

// failTimeKeyLen is the length of a by-org or by-domain index key.
const failTimeKeyLen = idLen + 8 + idLen

// failTimeKey is owner id | arrival | report id.
func failTimeKey(owner string, arrival time.Time, id string) []byte {
	k := make([]byte, 0, failTimeKeyLen)
	k = append(k, owner...)
	k = binary.BigEndian.AppendUint64(k, unixKey(arrival))
	return append(k, id...)
}

// failTimePrefix is owner id | arrival: where the reports of owner that
// arrived at or after t begin.
func failTimePrefix(owner string, t time.Time) []byte {
	k := make([]byte, 0, idLen+8)
	k = append(k, owner...)
	return binary.BigEndian.AppendUint64(k, unixKey(t))
}

// failKeyArrival returns the arrival date (Unix seconds) of an index key.
func failKeyArrival(k []byte) uint64 { return binary.BigEndian.Uint64(k[idLen : idLen+8]) }

// failKeyID returns the report id of an index key.
func failKeyID(k []byte) string { return string(k[idLen+8:]) }

// failIndexValue is domain id | auth failure mask | source IP ("" when
// unknown): what the list filters on, so that filtering reads no report.
func failIndexValue(r *FailureReport, mask byte) []byte {
	ip := reports.SourceIPOf(r)
	v := make([]byte, 0, idLen+1+len(ip))
	v = append(v, r.DomainID...)
	v = append(v, mask)
	return append(v, ip...)
}

// failIndexEntry is a decoded failIndexValue; its slices alias bbolt memory.
type failIndexEntry struct {
	domain []byte
	mask   byte
	ip     []byte
}

func decodeFailIndex(v []byte) (failIndexEntry, bool) {
	if len(v) < idLen+1 {
		return failIndexEntry{}, false
	}
	return failIndexEntry{domain: v[:idLen], mask: v[idLen], ip: v[idLen+1:]}, true
}

// failDedupKey is domain id | the first 16 bytes of SHA-256 of reporter,
// source IP, message id and arrival date (NUL-separated), or, for a report
// with an Identity, that identity in place of the arrival date: a report
// with the same four for the same domain is the same report.
func failDedupKey(r *FailureReport) []byte {
	h := sha256.New()
	for _, p := range []*string{r.Reporter, r.SourceIP, r.MessageID} {
		if p != nil {
			h.Write([]byte(*p))
		}
		h.Write([]byte{0})
	}
	if r.Identity != "" {
		// 0xff and a text: never the 8 bytes of an arrival date.
		h.Write([]byte{0xff})
		h.Write([]byte(r.Identity))
	} else {
		var ts [8]byte
		binary.BigEndian.PutUint64(ts[:], unixKey(r.ArrivalDate))
		h.Write(ts[:])
	}
	k := make([]byte, 0, idLen+sha256.Size)
	k = append(k, r.DomainID...)
	return h.Sum(k)[:idLen+16]
}

// failRollupKeyLen is the length of a failure roll-up key.
const failRollupKeyLen = idLen + 4 + idLen

// failRollupKey is org id | UTC day | domain id.
func failRollupKey(orgID string, day uint32, domainID string) []byte {
	k := make([]byte, 0, failRollupKeyLen)
	k = append(k, orgID...)
	k = binary.BigEndian.AppendUint32(k, day)
	return append(k, domainID...)
}

// failRollupDay returns the day of a roll-up key.
func failRollupDay(k []byte) uint32 { return binary.BigEndian.Uint32(k[idLen : idLen+4]) }

// failRollupDomain returns the domain id of a roll-up key.
func failRollupDomain(k []byte) string { return string(k[idLen+4:]) }
