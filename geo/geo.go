// Package geo maps an IP address to a country, city, coordinates and
// autonomous system, read from MaxMind-format (.mmdb) files: a City or
// Country database and an ASN (or ISP) database, either one optional.
//
// A DB is safe for concurrent use. It can be reloaded while lookups run
// (for SIGHUP after geoipupdate has replaced the files), and a nil *DB, or
// one opened without paths, is a valid "no database" value whose lookups
// answer nil, so callers need no nil checks.
package geo

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by Reload on a DB that has been closed.
var ErrClosed = errors.New("geo: database closed")

// Info is what the databases know about one address. Its JSON form is the
// "geo" object of API.md; a field is nil (null) when the databases have no
// answer for it.
type Info struct {
	CountryCode *string  `json:"country_code"`
	CountryName *string  `json:"country_name"` // English
	City        *string  `json:"city"`         // English
	Latitude    *float64 `json:"latitude"`
	Longitude   *float64 `json:"longitude"`
	ASN         *uint32  `json:"asn"`
	ASOrg       *string  `json:"as_org"`
}

// Config names the database files. An empty path means that database is not
// used; with both empty the DB answers nil to every lookup.
type Config struct {
	// CityPath is a City or Country database (GeoIP2/GeoLite2 or a
	// compatible layout). A Country database gives no city or coordinates.
	CityPath string
	// ASNPath is an ASN database, or an ISP database, which carries the same
	// autonomous_system_* keys.
	ASNPath string
	// Verify runs the library's full integrity check of every record when a
	// file is opened or reloaded. Without it, Open checks the metadata and
	// decodes a sample of records; a record that is corrupt further in then
	// only makes its own lookups come back empty. Verification reads the
	// whole file, which takes seconds for a full-size City database.
	Verify bool
}

// DB answers geolocation lookups. The zero value is not usable; call Open.
// A nil *DB is valid and means "no database".
type DB struct {
	cfg Config
	// cur is the set of open readers that lookups use; nil means no
	// database (not configured, or closed).
	cur atomic.Pointer[readerSet]
	// mu serialises Reload and Close; lookups never take it.
	mu     sync.Mutex
	closed bool
}

// Open opens the databases of cfg. With both paths empty it returns a DB
// that is not Enabled and answers nil, never an error.
//
// Open fails with an error naming the file when a file cannot be read, is
// not a valid MaxMind DB, holds records that do not decode, or is of the
// wrong kind for its slot (for example an ASN database given as the city
// database, as when the two paths are swapped).
func Open(cfg Config) (*DB, error) {
	d := &DB{cfg: cfg}
	set, err := openSet(cfg)
	if err != nil {
		return nil, err
	}
	if set != nil {
		d.cur.Store(set)
	}
	return d, nil
}

// Enabled reports whether at least one database is open.
func (d *DB) Enabled() bool {
	return d != nil && d.cur.Load() != nil
}

// Lookup returns what the databases know about ip, or nil when there is no
// database (a nil or closed DB, or one opened without paths). IPv4, IPv6 and
// IPv4-mapped IPv6 addresses are accepted. An address the databases do not
// cover, an invalid address, or a record that fails to decode gives an Info
// whose fields are nil; LookupErr reports the decode errors.
func (d *DB) Lookup(ip netip.Addr) *Info {
	info, _ := d.LookupErr(ip)
	return info
}

// LookupErr is Lookup that also returns why a database gave no answer when
// that was not a plain "not found": an invalid address, or a corrupt record
// (the error names the file). The Info is still returned, holding whatever
// the other database answered. Both are nil when there is no database.
func (d *DB) LookupErr(ip netip.Addr) (*Info, error) {
	set := d.acquire()
	if set == nil {
		return nil, nil
	}
	defer set.release()
	return set.lookup(ip)
}

// acquire returns the current reader set with a reference held, or nil
// when there is no database.
func (d *DB) acquire() *readerSet {
	if d == nil {
		return nil
	}
	for {
		set := d.cur.Load()
		if set == nil || set.acquire() {
			return set
		}
		// The set was swapped out and closed between the load and the
		// acquire; the next load sees its replacement.
	}
}

// Reload re-opens the files named at Open and swaps them in atomically:
// lookups in flight finish on the old files, which are closed once the last
// of them is done. On error the old databases keep serving and the error
// (naming the file) is returned. Reload of a DB opened without paths does
// nothing; Reload after Close returns ErrClosed.
//
// Replace database files by renaming a new file over the old one (as
// geoipupdate does), not by rewriting them in place: open files are
// memory-mapped.
func (d *DB) Reload() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	set, err := openSet(d.cfg)
	if err != nil {
		return err
	}
	if old := d.cur.Swap(set); old != nil {
		old.release()
	}
	return nil
}

// Close stops the DB: later lookups answer nil. Files still used by
// lookups in flight are closed when those finish; otherwise Close closes
// them at once and returns the first error from doing so. Closing twice
// or closing a nil DB returns nil.
func (d *DB) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if old := d.cur.Swap(nil); old != nil {
		return old.release()
	}
	return nil
}

// Description says which databases are in use, for the start-up log, for
// example "city: GeoLite2-City (built 2026-02-04); asn: GeoLite2-ASN (built
// 2026-02-04)", or "none" without a database.
func (d *DB) Description() string {
	set := d.acquire()
	if set == nil {
		return "none"
	}
	defer set.release()
	var parts []string
	if set.city != nil {
		parts = append(parts, "city: "+set.city.describe())
	}
	if set.asn != nil {
		parts = append(parts, "asn: "+set.asn.describe())
	}
	return strings.Join(parts, "; ")
}
