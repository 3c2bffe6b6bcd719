package reports

import (
	"cmp"
	"math"
	"slices"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// AuthCount counts messages passing and failing one mechanism.
type AuthCount struct {
	Pass int64 `json:"pass"`
	Fail int64 `json:"fail"`
}

// DMARCCount counts DMARC results; PassRate has 4 decimals, 0 without messages.
type DMARCCount struct {
	Pass     int64   `json:"pass"`
	Fail     int64   `json:"fail"`
	PassRate float64 `json:"pass_rate"`
}

// DispositionCount counts messages by applied disposition.
type DispositionCount struct {
	None       int64 `json:"none"`
	Quarantine int64 `json:"quarantine"`
	Reject     int64 `json:"reject"`
}

// CountryGroup counts messages from one country (nil code: unknown).
type CountryGroup struct {
	CountryCode *string `json:"country_code"`
	CountryName *string `json:"country_name"`
	Messages    int64   `json:"messages"`
	DMARCPass   int64   `json:"dmarc_pass"`
	DMARCFail   int64   `json:"dmarc_fail"`
}

// ASNGroup counts messages from one autonomous system (nil ASN: unknown).
type ASNGroup struct {
	ASN       *uint32 `json:"asn"`
	ASOrg     *string `json:"as_org"`
	Messages  int64   `json:"messages"`
	DMARCPass int64   `json:"dmarc_pass"`
	DMARCFail int64   `json:"dmarc_fail"`
}

// AuthResultGroup counts messages with one combination of results.
type AuthResultGroup struct {
	DKIM     string `json:"dkim"`
	SPF      string `json:"spf"`
	DMARC    string `json:"dmarc"`
	Messages int64  `json:"messages"`
}

// Summary is the statistics of a set of records, computed once at ingest.
// Groups are ordered by messages, most first.
type Summary struct {
	MessageCount int64             `json:"message_count"`
	DMARC        DMARCCount        `json:"dmarc"`
	DKIM         AuthCount         `json:"dkim"`
	SPF          AuthCount         `json:"spf"`
	Disposition  DispositionCount  `json:"disposition"`
	ByCountry    []CountryGroup    `json:"by_country"`
	ByASN        []ASNGroup        `json:"by_asn"`
	ByAuthResult []AuthResultGroup `json:"by_auth_result"`
}

// SourceStats counts the messages of one sending IP.
type SourceStats struct {
	SourceIP    string  `json:"source_ip"`
	Messages    int64   `json:"messages"`
	DMARCPass   int64   `json:"dmarc_pass"`
	DMARCFail   int64   `json:"dmarc_fail"`
	CountryCode *string `json:"country_code"`
	ASN         *uint32 `json:"asn"`
	ASOrg       *string `json:"as_org"`
}

// Statistics are computed once, at ingest: each report stores its Summary,
// and each domain has one roll-up per UTC day (the day of a report's
// date_begin) holding the sums of its reports, so that reading statistics
// never scans records.
//
// Per-source counts (top_sources) are capped: a day keeps at most
// MaxDaySources sources, those with the most messages; a report being
// ingested keeps at most 4 x MaxDaySources and then drops its smallest to
// MaxDaySources. Below the cap top_sources is exact; above it a source that
// is small on every day may be missing, and its messages then count only in
// the totals. Totals and every other group are always exact.

// MaxDaySources is how many sending IPs a domain's day roll-up keeps.
const MaxDaySources = 1000

// maxDraftSources is when a report being ingested prunes its sources.
const maxDraftSources = 4 * MaxDaySources

// SummaryAcc accumulates a Summary from records. Its groups are values in
// slices, found through a groupIndex: a report's records mostly share a few
// countries, networks and auth results, so a map per group kind cost three
// allocations per report and three hashes per record for nothing.
type SummaryAcc struct {
	messages                         int64
	dmarcPass, dmarcFail             int64
	dkimPass, dkimFail               int64
	spfPass, spfFail                 int64
	dispNone, dispQuarantine, dispRe int64

	country    []countryAcc
	countryIdx groupIndex[string] // by country code, "" = unknown
	asn        []asnAcc
	asnIdx     groupIndex[int64] // by ASN, -1 = unknown
	auth       []int64           // messages by authIdx's keys
	authIdx    groupIndex[authKey]
}

// countryAcc is a country's group; the code and name are the first ones
// counted (a name missing at first is taken from a later record).
type countryAcc struct {
	code, name           string
	hasCode, hasName     bool
	messages, pass, fail int64
}

type asnAcc struct {
	asn                  uint32
	org                  string
	hasASN, hasOrg       bool
	messages, pass, fail int64
}

type authKey struct{ dkim, spf, dmarc string }

// groupIndex finds a group's position by its key: by a scan while there
// are few (groupScan), then through a map. Positions are those of add.
type groupIndex[K comparable] struct {
	keys []K
	m    map[K]int32
}

// groupScan is how many keys a groupIndex scans before it builds a map.
const groupScan = 16

func (x *groupIndex[K]) find(k K) int {
	if x.m != nil {
		if i, ok := x.m[k]; ok {
			return int(i)
		}
		return -1
	}
	for i := range x.keys {
		if x.keys[i] == k {
			return i
		}
	}
	return -1
}

// add appends k, which find did not find, and returns its position.
func (x *groupIndex[K]) add(k K) int {
	i := len(x.keys)
	x.keys = append(x.keys, k)
	switch {
	case x.m != nil:
		x.m[k] = int32(i)
	case len(x.keys) > groupScan:
		x.m = make(map[K]int32, 2*len(x.keys))
		for j, k := range x.keys {
			x.m[k] = int32(j)
		}
	}
	return i
}

// NewSummaryAcc returns an empty accumulator.
func NewSummaryAcc() *SummaryAcc { return &SummaryAcc{} }

// Totals returns the messages counted and how many of them passed and
// failed DMARC.
func (a *SummaryAcc) Totals() (messages, pass, fail int64) {
	return a.messages, a.dmarcPass, a.dmarcFail
}

// Add counts one record. A disposition other than quarantine or reject
// (none, RFC 9990 "pass", or an unknown value) counts as none: the message
// was delivered as if there were no policy.
func (a *SummaryAcc) Add(r *Record) {
	n := r.Count
	dkim, spf, _ := r.aligned()
	pass := dkim || spf
	a.messages += n
	a.dmarcPass, a.dmarcFail = a.dmarcPass+ifPass(pass, n), a.dmarcFail+ifPass(!pass, n)
	a.dkimPass, a.dkimFail = a.dkimPass+ifPass(dkim, n), a.dkimFail+ifPass(!dkim, n)
	a.spfPass, a.spfFail = a.spfPass+ifPass(spf, n), a.spfFail+ifPass(!spf, n)
	switch r.Disposition {
	case "quarantine":
		a.dispQuarantine += n
	case "reject":
		a.dispRe += n
	default:
		a.dispNone += n
	}
	var cc, cname, asOrg *string
	var asn *uint32
	if g := r.Geo; g != nil {
		cc, cname, asn, asOrg = g.CountryCode, g.CountryName, g.ASN, g.ASOrg
	}
	p, f := ifPass(pass, n), ifPass(!pass, n)
	a.countCountry(cc, cname, n, p, f)
	a.countASN(asn, asOrg, n, p, f)
	a.countAuth(authKey{string(r.DKIM), string(r.SPF), dmarcResult(verdictOf(dkim), verdictOf(spf))}, n)
}

func ifPass(ok bool, n int64) int64 {
	if ok {
		return n
	}
	return 0
}

// countCountry adds messages to the group of code (nil = unknown). Only
// the strings are kept, never the pointers: a caller may reuse what they
// point to.
func (a *SummaryAcc) countCountry(code, name *string, messages, pass, fail int64) {
	key := ""
	if code != nil {
		key = *code
	}
	i := a.countryIdx.find(key)
	if i < 0 {
		i = a.countryIdx.add(key)
		a.country = append(a.country, countryAcc{})
		if code != nil {
			a.country[i].code, a.country[i].hasCode = *code, true
		}
	}
	g := &a.country[i]
	if !g.hasName && name != nil {
		g.name, g.hasName = *name, true
	}
	g.messages, g.pass, g.fail = g.messages+messages, g.pass+pass, g.fail+fail
}

// countASN adds messages to the group of asn (nil = unknown).
func (a *SummaryAcc) countASN(asn *uint32, org *string, messages, pass, fail int64) {
	key := int64(-1)
	if asn != nil {
		key = int64(*asn)
	}
	i := a.asnIdx.find(key)
	if i < 0 {
		i = a.asnIdx.add(key)
		a.asn = append(a.asn, asnAcc{})
		if asn != nil {
			a.asn[i].asn, a.asn[i].hasASN = *asn, true
		}
	}
	g := &a.asn[i]
	if !g.hasOrg && org != nil {
		g.org, g.hasOrg = *org, true
	}
	g.messages, g.pass, g.fail = g.messages+messages, g.pass+pass, g.fail+fail
}

func (a *SummaryAcc) countAuth(k authKey, messages int64) {
	i := a.authIdx.find(k)
	if i < 0 {
		i = a.authIdx.add(k)
		a.auth = append(a.auth, 0)
	}
	a.auth[i] += messages
}

// ptrIf is &v when ok, else nil.
func ptrIf[T any](v *T, ok bool) *T {
	if !ok {
		return nil
	}
	return v
}

// Merge adds o into a.
func (a *SummaryAcc) Merge(o *SummaryAcc) {
	a.messages += o.messages
	a.dmarcPass, a.dmarcFail = a.dmarcPass+o.dmarcPass, a.dmarcFail+o.dmarcFail
	a.dkimPass, a.dkimFail = a.dkimPass+o.dkimPass, a.dkimFail+o.dkimFail
	a.spfPass, a.spfFail = a.spfPass+o.spfPass, a.spfFail+o.spfFail
	a.dispNone, a.dispQuarantine, a.dispRe = a.dispNone+o.dispNone, a.dispQuarantine+o.dispQuarantine, a.dispRe+o.dispRe
	for i := range o.country {
		c := &o.country[i]
		a.countCountry(ptrIf(&c.code, c.hasCode), ptrIf(&c.name, c.hasName), c.messages, c.pass, c.fail)
	}
	for i := range o.asn {
		g := &o.asn[i]
		a.countASN(ptrIf(&g.asn, g.hasASN), ptrIf(&g.org, g.hasOrg), g.messages, g.pass, g.fail)
	}
	for i, k := range o.authIdx.keys {
		a.countAuth(k, o.auth[i])
	}
}

// Summary returns the Summary, groups ordered by messages (most first),
// ties by key, unknown last among equals. Its strings point into a, whose
// groups never change a string once set.
func (a *SummaryAcc) Summary() Summary {
	s := Summary{
		MessageCount: a.messages,
		DMARC:        DMARCCount{Pass: a.dmarcPass, Fail: a.dmarcFail, PassRate: passRate(a.dmarcPass, a.messages)},
		DKIM:         AuthCount{Pass: a.dkimPass, Fail: a.dkimFail},
		SPF:          AuthCount{Pass: a.spfPass, Fail: a.spfFail},
		Disposition:  DispositionCount{None: a.dispNone, Quarantine: a.dispQuarantine, Reject: a.dispRe},
		ByCountry:    make([]CountryGroup, 0, len(a.country)),
		ByASN:        make([]ASNGroup, 0, len(a.asn)),
		ByAuthResult: make([]AuthResultGroup, 0, len(a.auth)),
	}
	for i := range a.country {
		c := &a.country[i]
		s.ByCountry = append(s.ByCountry, CountryGroup{CountryCode: ptrIf(&c.code, c.hasCode), CountryName: ptrIf(&c.name, c.hasName),
			Messages: c.messages, DMARCPass: c.pass, DMARCFail: c.fail})
	}
	slices.SortFunc(s.ByCountry, func(x, y CountryGroup) int {
		return cmp.Or(cmp.Compare(y.Messages, x.Messages), compareOptString(x.CountryCode, y.CountryCode))
	})
	for i := range a.asn {
		g := &a.asn[i]
		s.ByASN = append(s.ByASN, ASNGroup{ASN: ptrIf(&g.asn, g.hasASN), ASOrg: ptrIf(&g.org, g.hasOrg),
			Messages: g.messages, DMARCPass: g.pass, DMARCFail: g.fail})
	}
	slices.SortFunc(s.ByASN, func(x, y ASNGroup) int {
		return cmp.Or(cmp.Compare(y.Messages, x.Messages), compareOptU32(x.ASN, y.ASN))
	})
	for i, k := range a.authIdx.keys {
		s.ByAuthResult = append(s.ByAuthResult, AuthResultGroup{DKIM: k.dkim, SPF: k.spf, DMARC: k.dmarc, Messages: a.auth[i]})
	}
	slices.SortFunc(s.ByAuthResult, func(x, y AuthResultGroup) int {
		return cmp.Or(cmp.Compare(y.Messages, x.Messages), cmp.Compare(x.DMARC, y.DMARC),
			cmp.Compare(x.DKIM, y.DKIM), cmp.Compare(x.SPF, y.SPF))
	})
	return s
}

// clonePtr copies what p points to: accumulators outlive the records they
// count, whose fields a caller may reuse.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	return new(*p)
}

// passRate is pass/total rounded to 4 decimals, 0 without messages.
func passRate(pass, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return math.Round(float64(pass)/float64(total)*10000) / 10000
}

// compareOptString orders nil after every string.
func compareOptString(x, y *string) int {
	switch {
	case x == nil && y == nil:
		return 0
	case x == nil:
		return 1
	case y == nil:
		return -1
	}
	return cmp.Compare(*x, *y)
}

func compareOptU32(x, y *uint32) int {
	switch {
	case x == nil && y == nil:
		return 0
	case x == nil:
		return 1
	case y == nil:
		return -1
	}
	return cmp.Compare(*x, *y)
}

// appendSummary encodes s (groups in their order).
func appendSummary(e codec.Enc, s *Summary) codec.Enc {
	return appendSummaryGroups(appendSummaryTotals(e, s), s)
}

// appendSummaryTotals encodes the ten totals of s, the head of its
// encoding.
func appendSummaryTotals(e codec.Enc, s *Summary) codec.Enc {
	e = e.Varint(s.MessageCount).Varint(s.DMARC.Pass).Varint(s.DMARC.Fail)
	e = e.Varint(s.DKIM.Pass).Varint(s.DKIM.Fail).Varint(s.SPF.Pass).Varint(s.SPF.Fail)
	return e.Varint(s.Disposition.None).Varint(s.Disposition.Quarantine).Varint(s.Disposition.Reject)
}

// appendSummaryGroups encodes the groups of s, the rest of its encoding.
func appendSummaryGroups(e codec.Enc, s *Summary) codec.Enc {
	e = e.Uvarint(uint64(len(s.ByCountry)))
	for i := range s.ByCountry {
		g := &s.ByCountry[i]
		e = e.Opt(g.CountryCode).Opt(g.CountryName).Varint(g.Messages).Varint(g.DMARCPass).Varint(g.DMARCFail)
	}
	e = e.Uvarint(uint64(len(s.ByASN)))
	for i := range s.ByASN {
		g := &s.ByASN[i]
		e = e.OptU32(g.ASN).Opt(g.ASOrg).Varint(g.Messages).Varint(g.DMARCPass).Varint(g.DMARCFail)
	}
	e = e.Uvarint(uint64(len(s.ByAuthResult)))
	for i := range s.ByAuthResult {
		g := &s.ByAuthResult[i]
		e = e.Sym(g.DKIM).Sym(g.SPF).Sym(g.DMARC).Varint(g.Messages)
	}
	return e
}

// decodeSummary reads what appendSummary wrote.
func decodeSummary(d *codec.Dec) Summary {
	var s Summary
	decodeSummaryTotals(d, &s)
	decodeSummaryGroups(d, &s)
	return s
}

// decodeSummaryTotals reads what appendSummaryTotals wrote into s.
func decodeSummaryTotals(d *codec.Dec, s *Summary) {
	s.MessageCount, s.DMARC.Pass, s.DMARC.Fail = d.Varint(), d.Varint(), d.Varint()
	s.DKIM.Pass, s.DKIM.Fail, s.SPF.Pass, s.SPF.Fail = d.Varint(), d.Varint(), d.Varint(), d.Varint()
	s.Disposition.None, s.Disposition.Quarantine, s.Disposition.Reject = d.Varint(), d.Varint(), d.Varint()
	s.DMARC.PassRate = passRate(s.DMARC.Pass, s.MessageCount)
}

// decodeSummaryGroups reads what appendSummaryGroups wrote into s.
func decodeSummaryGroups(d *codec.Dec, s *Summary) {
	s.ByCountry = make([]CountryGroup, d.Count())
	for i := range s.ByCountry {
		s.ByCountry[i] = CountryGroup{CountryCode: d.Opt(), CountryName: d.Opt(), Messages: d.Varint(), DMARCPass: d.Varint(), DMARCFail: d.Varint()}
	}
	s.ByASN = make([]ASNGroup, d.Count())
	for i := range s.ByASN {
		s.ByASN[i] = ASNGroup{ASN: d.OptU32(), ASOrg: d.Opt(), Messages: d.Varint(), DMARCPass: d.Varint(), DMARCFail: d.Varint()}
	}
	s.ByAuthResult = make([]AuthResultGroup, d.Count())
	for i := range s.ByAuthResult {
		s.ByAuthResult[i] = AuthResultGroup{DKIM: d.Sym(), SPF: d.Sym(), DMARC: d.Sym(), Messages: d.Varint()}
	}
}

// accOf turns a decoded Summary back into an accumulator, to merge into.
func accOf(s *Summary) *SummaryAcc {
	a := NewSummaryAcc()
	a.messages, a.dmarcPass, a.dmarcFail = s.MessageCount, s.DMARC.Pass, s.DMARC.Fail
	a.dkimPass, a.dkimFail, a.spfPass, a.spfFail = s.DKIM.Pass, s.DKIM.Fail, s.SPF.Pass, s.SPF.Fail
	a.dispNone, a.dispQuarantine, a.dispRe = s.Disposition.None, s.Disposition.Quarantine, s.Disposition.Reject
	for _, g := range s.ByCountry {
		a.countCountry(g.CountryCode, g.CountryName, g.Messages, g.DMARCPass, g.DMARCFail)
	}
	for _, g := range s.ByASN {
		a.countASN(g.ASN, g.ASOrg, g.Messages, g.DMARCPass, g.DMARCFail)
	}
	for _, g := range s.ByAuthResult {
		a.countAuth(authKey{g.DKIM, g.SPF, g.DMARC}, g.Messages)
	}
	return a
}

// SourceCount is the mail of one source IP.
type SourceCount struct {
	Messages, Pass, Fail int64
	CC, ASOrg            *string
	ASN                  *uint32
}

// SourceAcc counts mail per source IP, keeping at most a cap of them.
type SourceAcc map[string]*SourceCount

// Add counts c for source ip, copying what its geolocation points to.
func (s SourceAcc) Add(ip string, c SourceCount) {
	g := s[ip]
	if g == nil {
		g = &SourceCount{CC: clonePtr(c.CC), ASOrg: clonePtr(c.ASOrg), ASN: clonePtr(c.ASN)}
		s[ip] = g
	}
	g.Messages, g.Pass, g.Fail = g.Messages+c.Messages, g.Pass+c.Pass, g.Fail+c.Fail
}

// Merge adds o into s. The two may share the pointees of their
// geolocation, which are never changed: the writer of ingest merges every
// report into its day, and a copy per source of every report was its
// largest cost.
func (s SourceAcc) Merge(o SourceAcc) {
	for ip, c := range o {
		if g := s[ip]; g != nil {
			g.Messages, g.Pass, g.Fail = g.Messages+c.Messages, g.Pass+c.Pass, g.Fail+c.Fail
			continue
		}
		g := *c
		s[ip] = &g
	}
}

// MergeCounts adds a report's sources into s. The counts of its new
// sources are allocated together: the single writer made an object per
// source of every report.
func (s SourceAcc) MergeCounts(o []IPCount) {
	var slab []SourceCount
	for i := range o {
		c := &o[i]
		if g := s[c.IP]; g != nil {
			g.Messages, g.Pass, g.Fail = g.Messages+c.Messages, g.Pass+c.Pass, g.Fail+c.Fail
			continue
		}
		if slab == nil {
			slab = make([]SourceCount, 0, len(o)-i)
		}
		slab = append(slab, c.SourceCount)
		s[c.IP] = &slab[len(slab)-1]
	}
}

// Sorted returns the sources, most messages first, ties by IP.
func (s SourceAcc) Sorted() []SourceStats {
	out := make([]SourceStats, 0, len(s))
	for ip, c := range s {
		out = append(out, SourceStats{SourceIP: ip, Messages: c.Messages, DMARCPass: c.Pass, DMARCFail: c.Fail,
			CountryCode: c.CC, ASN: c.ASN, ASOrg: c.ASOrg})
	}
	slices.SortFunc(out, func(x, y SourceStats) int {
		return cmp.Or(cmp.Compare(y.Messages, x.Messages), cmp.Compare(x.SourceIP, y.SourceIP))
	})
	return out
}

// Prune drops all but the keep sources with the most messages.
func (s SourceAcc) Prune(keep int) {
	if len(s) <= keep {
		return
	}
	for _, x := range s.Sorted()[keep:] {
		delete(s, x.SourceIP)
	}
}

// DayRollup is one domain's sums for one UTC day.
type DayRollup struct {
	Reports int64
	Sum     *SummaryAcc
	Src     SourceAcc
	Size    int // bytes of its last encoding, to size the next one
}

// NewDayRollup returns an empty roll-up.
func NewDayRollup() *DayRollup {
	return &DayRollup{Sum: NewSummaryAcc(), Src: make(SourceAcc)}
}

// AppendDayRollup encodes r: version, reports, summary, sources.
func AppendDayRollup(e codec.Enc, r *DayRollup) codec.Enc {
	e = append(e, codecVersion)
	e = e.Varint(r.Reports)
	s := r.Sum.Summary()
	e = appendSummary(e, &s)
	e = e.Uvarint(uint64(len(r.Src)))
	for ip, c := range r.Src {
		e = e.Str(ip).Varint(c.Messages).Varint(c.Pass).Varint(c.Fail).Opt(c.CC).OptU32(c.ASN).Opt(c.ASOrg)
	}
	return e
}

// DecodeDayRollup reads what AppendDayRollup or AppendSealedDayRollup
// wrote.
func DecodeDayRollup(raw []byte) (*DayRollup, error) {
	if DayRollupSealed(raw) {
		return decodeSealedDayRollup(raw)
	}
	d := codec.NewDec(raw)
	if d.Byte() != codecVersion {
		return nil, errCorrupt
	}
	r := &DayRollup{Reports: d.Varint(), Size: len(raw)}
	s := decodeSummary(&d)
	r.Sum = accOf(&s)
	n := d.Count()
	r.Src = make(SourceAcc, n)
	for range n {
		ip := d.Str()
		r.Src[ip] = &SourceCount{Messages: d.Varint(), Pass: d.Varint(), Fail: d.Varint(), CC: d.Opt(), ASN: d.OptU32(), ASOrg: d.Opt()}
	}
	if !d.Done() {
		return nil, errCorrupt
	}
	return r, nil
}
