package store

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// The reverse DNS cache: what the last lookup of a source IP found, kept
// by the job of package senders (positive and negative answers alike) and
// read by the sources views. The store keeps the facts; the job decides
// when an entry is due again.

// RDNSStatus is the outcome of a reverse DNS lookup.
type RDNSStatus byte

// Outcomes of a reverse DNS lookup.
const (
	// RDNSConfirmed: a PTR name whose A/AAAA records hold the IP.
	RDNSConfirmed RDNSStatus = iota + 1
	// RDNSUnconfirmed: PTR names, none of which resolves back to the IP.
	RDNSUnconfirmed
	// RDNSNotFound: no PTR record (NXDOMAIN or NODATA).
	RDNSNotFound
	// RDNSTemporary: the lookup failed for now (SERVFAIL, timeout).
	RDNSTemporary
)

// RDNSEntry is the cached reverse DNS of one IP. Hostname is the
// forward-confirmed name (RDNSConfirmed) or the first PTR name
// (RDNSUnconfirmed), else "". Failures counts temporary failures in a row.
type RDNSEntry struct {
	IP        string
	Status    RDNSStatus
	Hostname  string
	CheckedAt time.Time
	Failures  int
}

// GetRDNS returns the cached entries of ips that have one, by IP.
func (db *DB) GetRDNS(ips []string) (map[string]RDNSEntry, error) {
	out := make(map[string]RDNSEntry, len(ips))
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRDNS)
		for _, ip := range ips {
			v := b.Get([]byte(ip))
			if v == nil {
				continue
			}
			e, err := decodeRDNS(ip, v)
			if err != nil {
				return err
			}
			out[ip] = e
		}
		return nil
	})
	if err != nil {
		return nil, wrap("get reverse dns", err)
	}
	return out, nil
}

// PutRDNS stores entries, replacing those of the same IPs. ErrInvalid for
// an entry without IP or status.
func (db *DB) PutRDNS(entries []RDNSEntry) error {
	for _, e := range entries {
		if e.IP == "" || e.Status < RDNSConfirmed || e.Status > RDNSTemporary || len(e.Hostname) > 255 {
			return wrap("put reverse dns", errorf(ErrInvalid, "reverse DNS entry of %q is malformed", e.IP))
		}
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRDNS)
		for _, e := range entries {
			v := codec.Enc{codecVersion, byte(e.Status)}.Varint(e.CheckedAt.Unix()).Uvarint(uint64(e.Failures)).Str(e.Hostname)
			if err := b.Put([]byte(e.IP), v); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap("put reverse dns", err)
}

func decodeRDNS(ip string, raw []byte) (RDNSEntry, error) {
	d := codec.NewDec(raw)
	if d.Byte() != codecVersion {
		return RDNSEntry{}, errCorrupt
	}
	e := RDNSEntry{IP: ip, Status: RDNSStatus(d.Byte())}
	e.CheckedAt = time.Unix(d.Varint(), 0).UTC()
	e.Failures = int(min(d.Uvarint(), 1<<20))
	e.Hostname = d.Str()
	if !d.Done() || e.Status < RDNSConfirmed || e.Status > RDNSTemporary {
		return RDNSEntry{}, errCorrupt
	}
	return e, nil
}

// TemporaryRDNS returns up to max entries whose last lookup failed for
// now, to be tried again.
func (db *DB) TemporaryRDNS(max int) ([]RDNSEntry, error) {
	var out []RDNSEntry
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRDNS).Cursor()
		for k, v := c.First(); k != nil && len(out) < max; k, v = c.Next() {
			if len(v) < 2 || RDNSStatus(v[1]) != RDNSTemporary {
				continue
			}
			e, err := decodeRDNS(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("temporary reverse dns", err)
	}
	return out, nil
}
