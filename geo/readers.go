package geo

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"unicode"

	"github.com/oschwald/maxminddb-golang/v2"
)

// probeRecords is how many records Open decodes when not asked to verify the
// whole file: enough to reject a file whose data section is broken
// throughout (such as a database written with the wrong float encoding)
// while costing well under a millisecond.
const probeRecords = 1000

// Slot names, used in messages and to check a file's database type.
const (
	slotCity = "city"
	slotASN  = "ASN"
)

// readerSet is one generation of open databases. Lookups hold a reference
// while they read, so Reload and Close can swap a set out without closing
// files under a lookup in flight.
type readerSet struct {
	city, asn *source // nil when that database is not configured
	// refs counts the DB's own reference (while the set is current) plus
	// one per lookup in flight. It never rises again once it reaches zero:
	// by then the set is no longer current and its files are closed.
	refs atomic.Int64
}

// acquire takes a reference, failing if the set has already been closed.
func (s *readerSet) acquire() bool {
	for {
		n := s.refs.Load()
		if n == 0 {
			return false
		}
		if s.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes the files and returns the
// error from doing so.
func (s *readerSet) release() error {
	if s.refs.Add(-1) != 0 {
		return nil
	}
	return s.close()
}

func (s *readerSet) close() error {
	var errs []error
	for _, src := range []*source{s.city, s.asn} {
		if src == nil {
			continue
		}
		if err := src.reader.Close(); err != nil {
			errs = append(errs, fmt.Errorf("geo: close %s database %q: %w", src.slot, src.path, err))
		}
	}
	return errors.Join(errs...)
}

// answer holds an Info together with the values its fields point to, so a
// lookup makes one allocation; the decoders write straight into it.
type answer struct {
	info Info
	loc  locationRecord
	as   asnRecord
}

func (s *readerSet) lookup(ip netip.Addr) (*Info, error) {
	a := new(answer)
	if !ip.IsValid() {
		return &a.info, errors.New("geo: invalid IP address")
	}
	// Unmap so an IPv4-only database answers IPv4-mapped addresses too.
	ip = ip.Unmap()
	var errs []error
	if s.city != nil {
		if err := s.city.reader.Lookup(ip).Decode(&a.loc); err != nil {
			a.loc = locationRecord{}
			errs = append(errs, s.city.decodeError(ip, err))
		}
	}
	if s.asn != nil {
		if err := s.asn.reader.Lookup(ip).Decode(&a.as); err != nil {
			a.as = asnRecord{}
			errs = append(errs, s.asn.decodeError(ip, err))
		}
	}
	a.fill()
	return &a.info, errors.Join(errs...)
}

// fill points the Info's fields at the decoded values that are present.
// Empty strings and AS number 0 (reserved) count as absent, and coordinates
// only come as a pair.
func (a *answer) fill() {
	l, as, info := &a.loc, &a.as, &a.info
	info.CountryCode = nonEmpty(&l.countryCode)
	info.CountryName = nonEmpty(&l.countryName)
	info.City = nonEmpty(&l.city)
	if l.hasLatitude && l.hasLongitude {
		info.Latitude, info.Longitude = &l.latitude, &l.longitude
	}
	if as.number != 0 {
		info.ASN = &as.number
	}
	info.ASOrg = nonEmpty(&as.org)
}

func nonEmpty(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}

// source is one open database file.
type source struct {
	slot   string
	path   string
	reader *maxminddb.Reader
}

func (s *source) describe() string {
	m := s.reader.Metadata
	return fmt.Sprintf("%s (built %s)", m.DatabaseType, m.BuildTime().UTC().Format("2006-01-02"))
}

func (s *source) decodeError(ip netip.Addr, err error) error {
	return fmt.Errorf("geo: %s database %q: record for %s: %w", s.slot, s.path, ip, err)
}

// openSet opens the files of cfg as a set holding the DB's reference, or
// returns nil when cfg names no file.
func openSet(cfg Config) (*readerSet, error) {
	if cfg.CityPath == "" && cfg.ASNPath == "" {
		return nil, nil
	}
	set := &readerSet{}
	set.refs.Store(1)
	var err error
	if cfg.CityPath != "" {
		if set.city, err = openSource(slotCity, cfg.CityPath, cfg.Verify); err != nil {
			return nil, err
		}
	}
	if cfg.ASNPath != "" {
		if set.asn, err = openSource(slotASN, cfg.ASNPath, cfg.Verify); err != nil {
			_ = set.close() // the open error is the one worth reporting
			return nil, err
		}
	}
	return set, nil
}

// openSource opens one file and checks that it suits its slot and that its
// records decode.
func openSource(slot, path string, verify bool) (*source, error) {
	r, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("geo: open %s database %q: %w", slot, path, err)
	}
	src := &source{slot: slot, path: path, reader: r}
	if err := src.check(verify); err != nil {
		_ = r.Close() // the check error is the one worth reporting
		return nil, err
	}
	return src, nil
}

func (s *source) check(verify bool) error {
	dbType := s.reader.Metadata.DatabaseType
	switch got := slotOf(dbType); {
	case got == s.slot:
	case got != "":
		return fmt.Errorf("geo: %s database %q has type %q, which is %s; are the city and ASN paths swapped?",
			s.slot, s.path, dbType, slotWants(got))
	default:
		return fmt.Errorf("geo: %s database %q has unsupported type %q; want %s",
			s.slot, s.path, dbType, slotWants(s.slot))
	}
	if verify {
		if err := s.reader.Verify(); err != nil {
			return fmt.Errorf("geo: %s database %q is corrupt: %w", s.slot, s.path, err)
		}
		return nil
	}
	return s.probe()
}

// probe decodes the first records of the file as lookups will.
func (s *source) probe() error {
	n := 0
	for res := range s.reader.Networks() {
		var err error
		if s.slot == slotCity {
			err = res.Decode(&locationRecord{})
		} else {
			err = res.Decode(&asnRecord{})
		}
		if err != nil {
			return fmt.Errorf("geo: %s database %q is corrupt: record for %s: %w", s.slot, s.path, res.Prefix(), err)
		}
		if n++; n == probeRecords {
			break
		}
	}
	return nil
}

// slotWants describes the databases a slot takes.
func slotWants(slot string) string {
	if slot == slotCity {
		return "a City or Country database"
	}
	return "an ASN or ISP database"
}

// slotOf tells which slot a metadata database_type belongs in, or "" when
// dmarcd cannot use it. It matches words, not exact names, so compatible
// third-party files ("DBIP-City-Lite", "DBIP-ASN-Lite (compat=GeoLite2-ASN)")
// are accepted alongside MaxMind's own.
func slotOf(dbType string) string {
	words := strings.FieldsFunc(strings.ToLower(dbType), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	slot := ""
	for _, w := range words {
		switch w {
		case "asn", "isp":
			return slotASN
		case "city", "country", "enterprise":
			slot = slotCity
		}
	}
	return slot
}
