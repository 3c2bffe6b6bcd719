package reports

import (
	"cmp"
	"slices"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// FailureCheckCounts counts failure reports per failed check (a report
// naming several counts for each).
type FailureCheckCounts struct {
	DMARC int64 `json:"dmarc"`
	SPF   int64 `json:"spf"`
	DKIM  int64 `json:"dkim"`
}

// FailureSourceCount counts the failure reports about one source IP.
type FailureSourceCount struct {
	SourceIP    string  `json:"source_ip"`
	Count       int64   `json:"count"`
	CountryCode *string `json:"country_code"`
}

// FailureCountryCount counts the failure reports from one country (nil
// code: unknown, or no source IP).
type FailureCountryCount struct {
	CountryCode *string `json:"country_code"`
	CountryName *string `json:"country_name"`
	Count       int64   `json:"count"`
}

// FailureASNCount counts the failure reports from one autonomous system
// (nil ASN: unknown, or no source IP).
type FailureASNCount struct {
	ASN   *uint32 `json:"asn"`
	ASOrg *string `json:"as_org"`
	Count int64   `json:"count"`
}

// FailureDay counts the failure reports of one domain of one organization
// on one UTC day (of their arrival date): what the summary and statistics
// read instead of the reports. Sources are capped at MaxDaySources a day
// (the ones with the most reports), as for aggregate roll-ups: below the
// cap top_source_ips is exact; every other count always is.
type FailureDay struct {
	total     int64
	auth      [len(failChecks)]int64
	countries map[string]*failCountry // by code, "" = unknown
	asns      map[int64]*failASN      // by ASN, -1 = unknown
	sources   map[string]*failSource  // by IP; reports without one are not here
}

type failCountry struct {
	code, name *string
	n          int64
}

type failASN struct {
	asn *uint32
	org *string
	n   int64
}

type failSource struct {
	cc *string
	n  int64
}

// NewFailureDay returns an empty roll-up.
func NewFailureDay() *FailureDay {
	return &FailureDay{countries: map[string]*failCountry{}, asns: map[int64]*failASN{}, sources: map[string]*failSource{}}
}

// Add counts one report n times (n is -1 to take it back out).
func (f *FailureDay) Add(r *FailureReport, mask byte, n int64) {
	f.total += n
	for i, c := range failChecks {
		if mask&c.bit != 0 {
			f.auth[i] += n
		}
	}
	var cc, cname, asOrg *string
	var asn *uint32
	if g := r.Geo; g != nil {
		cc, cname, asn, asOrg = g.CountryCode, g.CountryName, g.ASN, g.ASOrg
	}
	f.addCountry(&failCountry{code: cc, name: cname, n: n})
	f.addASN(&failASN{asn: asn, org: asOrg, n: n})
	if ip := SourceIPOf(r); ip != "" {
		f.addSource(ip, &failSource{cc: cc, n: n})
	}
}

func (f *FailureDay) addCountry(c *failCountry) {
	key := ""
	if c.code != nil {
		key = *c.code
	}
	g := f.countries[key]
	if g == nil {
		g = &failCountry{code: clonePtr(c.code), name: clonePtr(c.name)}
		f.countries[key] = g
	}
	if g.name == nil {
		g.name = clonePtr(c.name)
	}
	if g.n += c.n; g.n <= 0 {
		delete(f.countries, key)
	}
}

func (f *FailureDay) addASN(a *failASN) {
	key := int64(-1)
	if a.asn != nil {
		key = int64(*a.asn)
	}
	g := f.asns[key]
	if g == nil {
		g = &failASN{asn: clonePtr(a.asn), org: clonePtr(a.org)}
		f.asns[key] = g
	}
	if g.org == nil {
		g.org = clonePtr(a.org)
	}
	if g.n += a.n; g.n <= 0 {
		delete(f.asns, key)
	}
}

// addSource counts a source. Taking back a source pruned since is a no-op.
func (f *FailureDay) addSource(ip string, s *failSource) {
	g := f.sources[ip]
	if g == nil {
		if s.n <= 0 {
			return
		}
		g = &failSource{cc: clonePtr(s.cc)}
		f.sources[ip] = g
	}
	if g.cc == nil {
		g.cc = clonePtr(s.cc)
	}
	if g.n += s.n; g.n <= 0 {
		delete(f.sources, ip)
	}
}

// Merge adds o into f.
func (f *FailureDay) Merge(o *FailureDay) {
	f.total += o.total
	for i := range f.auth {
		f.auth[i] += o.auth[i]
	}
	for _, c := range o.countries {
		f.addCountry(c)
	}
	for _, a := range o.asns {
		f.addASN(a)
	}
	for ip, s := range o.sources {
		f.addSource(ip, s)
	}
}

// Prune drops all but the keep sources with the most reports.
func (f *FailureDay) Prune(keep int) {
	if len(f.sources) <= keep {
		return
	}
	for _, s := range f.topSources(len(f.sources))[keep:] {
		delete(f.sources, s.SourceIP)
	}
}

// topSources returns the n sources with the most reports, ties by IP.
func (f *FailureDay) topSources(n int) []FailureSourceCount {
	out := make([]FailureSourceCount, 0, len(f.sources))
	for ip, s := range f.sources {
		out = append(out, FailureSourceCount{SourceIP: ip, Count: s.n, CountryCode: s.cc})
	}
	slices.SortFunc(out, func(x, y FailureSourceCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), cmp.Compare(x.SourceIP, y.SourceIP))
	})
	return out[:min(n, len(out))]
}

// ByAuthFailure returns the counts per check.
func (f *FailureDay) ByAuthFailure() FailureCheckCounts {
	return FailureCheckCounts{DMARC: f.auth[0], SPF: f.auth[1], DKIM: f.auth[2]}
}

// ByCountry returns the country groups, most reports first, unknown last
// among equals.
func (f *FailureDay) ByCountry() []FailureCountryCount {
	out := make([]FailureCountryCount, 0, len(f.countries))
	for _, c := range f.countries {
		out = append(out, FailureCountryCount{CountryCode: c.code, CountryName: c.name, Count: c.n})
	}
	slices.SortFunc(out, func(x, y FailureCountryCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), compareOptString(x.CountryCode, y.CountryCode))
	})
	return out
}

// ByASN returns the ASN groups, most reports first, unknown last among
// equals.
func (f *FailureDay) ByASN() []FailureASNCount {
	out := make([]FailureASNCount, 0, len(f.asns))
	for _, a := range f.asns {
		out = append(out, FailureASNCount{ASN: a.asn, ASOrg: a.org, Count: a.n})
	}
	slices.SortFunc(out, func(x, y FailureASNCount) int {
		return cmp.Or(cmp.Compare(y.Count, x.Count), compareOptU32(x.ASN, y.ASN))
	})
	return out
}

// AppendFailureDay encodes f: version, total, checks, countries, ASNs,
// sources.
func AppendFailureDay(e codec.Enc, f *FailureDay) codec.Enc {
	e = append(e, codecVersion)
	e = e.Varint(f.total)
	for _, n := range f.auth {
		e = e.Varint(n)
	}
	e = e.Uvarint(uint64(len(f.countries)))
	for _, c := range f.countries {
		e = e.Opt(c.code).Opt(c.name).Varint(c.n)
	}
	e = e.Uvarint(uint64(len(f.asns)))
	for _, a := range f.asns {
		e = e.OptU32(a.asn).Opt(a.org).Varint(a.n)
	}
	e = e.Uvarint(uint64(len(f.sources)))
	for ip, s := range f.sources {
		e = e.Str(ip).Opt(s.cc).Varint(s.n)
	}
	return e
}

// DecodeFailureDay reads what AppendFailureDay wrote.
func DecodeFailureDay(raw []byte) (*FailureDay, error) {
	d := codec.NewStringDec(raw)
	if d.Byte() != codecVersion {
		return nil, errCorrupt
	}
	f := NewFailureDay()
	f.total = d.Varint()
	for i := range f.auth {
		f.auth[i] = d.Varint()
	}
	for range d.Count() {
		c := &failCountry{code: d.Opt(), name: d.Opt(), n: d.Varint()}
		f.countries[derefOr(c.code, "")] = c
	}
	for range d.Count() {
		a := &failASN{asn: d.OptU32(), org: d.Opt(), n: d.Varint()}
		key := int64(-1)
		if a.asn != nil {
			key = int64(*a.asn)
		}
		f.asns[key] = a
	}
	n := d.Count()
	f.sources = make(map[string]*failSource, n)
	for range n {
		ip := d.Str()
		f.sources[ip] = &failSource{cc: d.Opt(), n: d.Varint()}
	}
	if !d.Done() {
		return nil, errCorrupt
	}
	return f, nil
}

func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// FailSummaryAcc sums encoded roll-ups for the summary, reading only what
// it shows (totals, checks, domains, sources) straight from the stored
// bytes: the summary must stay fast however many reports the window holds,
// and decoding whole roll-ups (countries, ASNs, a map per day) was most of
// its cost.
type FailSummaryAcc struct {
	total   int64
	auth    [len(failChecks)]int64
	domains map[string]int64
	sources map[string]*failSource
}

// NewFailSummaryAcc returns an empty accumulator.
func NewFailSummaryAcc() *FailSummaryAcc {
	return &FailSummaryAcc{domains: map[string]int64{}, sources: map[string]*failSource{}}
}

// Add merges one encoded FailureDay of domainID and returns its total.
func (a *FailSummaryAcc) Add(raw []byte, domainID string) (int64, error) {
	d := codec.NewDec(raw)
	if d.Byte() != codecVersion {
		return 0, errCorrupt
	}
	total := d.Varint()
	var auth [len(failChecks)]int64
	for i := range auth {
		auth[i] = d.Varint()
	}
	for range d.Count() { // countries
		d.RawOpt()
		d.RawOpt()
		d.Varint()
	}
	for range d.Count() { // ASNs
		d.OptU32()
		d.RawOpt()
		d.Varint()
	}
	for range d.Count() {
		ip := d.RawStr()
		cc := d.RawOpt()
		n := d.Varint()
		if !d.Ok() {
			break
		}
		s := a.sources[string(ip)]
		if s == nil {
			s = &failSource{}
			a.sources[string(ip)] = s
		}
		if s.cc == nil && cc != nil {
			s.cc = new(string(cc))
		}
		s.n += n
	}
	if !d.Done() {
		return 0, errCorrupt
	}
	a.total += total
	for i, n := range auth {
		a.auth[i] += n
	}
	a.domains[domainID] += total
	return total, nil
}

// Total returns the reports counted.
func (f *FailureDay) Total() int64 { return f.total }

// Top returns the n sources with the most reports, ties by IP.
func (f *FailureDay) Top(n int) []FailureSourceCount { return topFailSources(f.sources, n) }

// Total returns the reports counted.
func (a *FailSummaryAcc) Total() int64 { return a.total }

// ByAuthFailure returns the counts per check.
func (a *FailSummaryAcc) ByAuthFailure() FailureCheckCounts {
	return FailureCheckCounts{DMARC: a.auth[0], SPF: a.auth[1], DKIM: a.auth[2]}
}

// Domains returns the reports counted per domain id.
func (a *FailSummaryAcc) Domains() map[string]int64 { return a.domains }

// Top returns the n sources with the most reports, ties by IP.
func (a *FailSummaryAcc) Top(n int) []FailureSourceCount { return topFailSources(a.sources, n) }

// topFailSources returns the n sources with the most reports (ties by IP)
// by selection, not by sorting them all.
func topFailSources(sources map[string]*failSource, n int) []FailureSourceCount {
	better := func(x, y FailureSourceCount) bool {
		return x.Count > y.Count || x.Count == y.Count && x.SourceIP < y.SourceIP
	}
	top := make([]FailureSourceCount, 0, max(n, 0)+1)
	if n <= 0 {
		return top
	}
	for ip, s := range sources {
		c := FailureSourceCount{SourceIP: ip, Count: s.n, CountryCode: s.cc}
		if len(top) == n && !better(c, top[n-1]) {
			continue
		}
		i := len(top)
		for i > 0 && better(c, top[i-1]) {
			i--
		}
		top = slices.Insert(top, i, c)
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}
