package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
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

// ReportStats is the statistics of one report.
type ReportStats struct {
	ReportID string `json:"report_id"`
	Summary
}

// DayStats is one UTC day of a domain's statistics.
type DayStats struct {
	Date      string `json:"date"`
	Messages  int64  `json:"messages"`
	DMARCPass int64  `json:"dmarc_pass"`
	DMARCFail int64  `json:"dmarc_fail"`
	Reports   int    `json:"reports"`
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

// DomainStats is the statistics of a domain over a range of UTC days.
type DomainStats struct {
	DomainID string    `json:"domain_id"`
	DateFrom time.Time `json:"date_from"`
	DateTo   time.Time `json:"date_to"`
	Summary
	ReportCount int           `json:"report_count"`
	ByDay       []DayStats    `json:"by_day"`
	TopSources  []SourceStats `json:"top_sources"`
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

// maxStatsDays is the longest range DomainStatistics serves.
const maxStatsDays = 366

// topSources is how many sources DomainStatistics returns.
const topSources = 20

// summaryAcc accumulates a Summary from records. Its groups are values in
// slices, found through a groupIndex: a report's records mostly share a few
// countries, networks and auth results, so a map per group kind cost three
// allocations per report and three hashes per record for nothing.
type summaryAcc struct {
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

func newSummaryAcc() *summaryAcc { return &summaryAcc{} }

// add counts one record. A disposition other than quarantine or reject
// (none, RFC 9990 "pass", or an unknown value) counts as none: the message
// was delivered as if there were no policy.
func (a *summaryAcc) add(r *Record) {
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
func (a *summaryAcc) countCountry(code, name *string, messages, pass, fail int64) {
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
func (a *summaryAcc) countASN(asn *uint32, org *string, messages, pass, fail int64) {
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

func (a *summaryAcc) countAuth(k authKey, messages int64) {
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

// merge adds o into a.
func (a *summaryAcc) merge(o *summaryAcc) {
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

// summary returns the Summary, groups ordered by messages (most first),
// ties by key, unknown last among equals. Its strings point into a, whose
// groups never change a string once set.
func (a *summaryAcc) summary() Summary {
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
func appendSummary(e enc, s *Summary) enc {
	e = e.varint(s.MessageCount).varint(s.DMARC.Pass).varint(s.DMARC.Fail)
	e = e.varint(s.DKIM.Pass).varint(s.DKIM.Fail).varint(s.SPF.Pass).varint(s.SPF.Fail)
	e = e.varint(s.Disposition.None).varint(s.Disposition.Quarantine).varint(s.Disposition.Reject)
	e = e.uvarint(uint64(len(s.ByCountry)))
	for i := range s.ByCountry {
		g := &s.ByCountry[i]
		e = e.opt(g.CountryCode).opt(g.CountryName).varint(g.Messages).varint(g.DMARCPass).varint(g.DMARCFail)
	}
	e = e.uvarint(uint64(len(s.ByASN)))
	for i := range s.ByASN {
		g := &s.ByASN[i]
		e = e.optU32(g.ASN).opt(g.ASOrg).varint(g.Messages).varint(g.DMARCPass).varint(g.DMARCFail)
	}
	e = e.uvarint(uint64(len(s.ByAuthResult)))
	for i := range s.ByAuthResult {
		g := &s.ByAuthResult[i]
		e = e.sym(g.DKIM).sym(g.SPF).sym(g.DMARC).varint(g.Messages)
	}
	return e
}

// decodeSummary reads what appendSummary wrote.
func decodeSummary(d *dec) Summary {
	var s Summary
	s.MessageCount, s.DMARC.Pass, s.DMARC.Fail = d.varint(), d.varint(), d.varint()
	s.DKIM.Pass, s.DKIM.Fail, s.SPF.Pass, s.SPF.Fail = d.varint(), d.varint(), d.varint(), d.varint()
	s.Disposition.None, s.Disposition.Quarantine, s.Disposition.Reject = d.varint(), d.varint(), d.varint()
	s.DMARC.PassRate = passRate(s.DMARC.Pass, s.MessageCount)
	s.ByCountry = make([]CountryGroup, d.count())
	for i := range s.ByCountry {
		s.ByCountry[i] = CountryGroup{CountryCode: d.opt(), CountryName: d.opt(), Messages: d.varint(), DMARCPass: d.varint(), DMARCFail: d.varint()}
	}
	s.ByASN = make([]ASNGroup, d.count())
	for i := range s.ByASN {
		s.ByASN[i] = ASNGroup{ASN: d.optU32(), ASOrg: d.opt(), Messages: d.varint(), DMARCPass: d.varint(), DMARCFail: d.varint()}
	}
	s.ByAuthResult = make([]AuthResultGroup, d.count())
	for i := range s.ByAuthResult {
		s.ByAuthResult[i] = AuthResultGroup{DKIM: d.sym(), SPF: d.sym(), DMARC: d.sym(), Messages: d.varint()}
	}
	return s
}

// accOf turns a decoded Summary back into an accumulator, to merge into.
func accOf(s *Summary) *summaryAcc {
	a := newSummaryAcc()
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

// sourceCount is the mail of one source IP.
type sourceCount struct {
	messages, pass, fail int64
	cc, asOrg            *string
	asn                  *uint32
}

// sourceAcc counts mail per source IP, keeping at most a cap of them.
type sourceAcc map[string]*sourceCount

func (s sourceAcc) add(ip string, c sourceCount) {
	g := s[ip]
	if g == nil {
		g = &sourceCount{cc: clonePtr(c.cc), asOrg: clonePtr(c.asOrg), asn: clonePtr(c.asn)}
		s[ip] = g
	}
	g.messages, g.pass, g.fail = g.messages+c.messages, g.pass+c.pass, g.fail+c.fail
}

// merge adds o into s. The two may share the pointees of their
// geolocation, which are never changed: the writer of ingest merges every
// report into its day, and a copy per source of every report was its
// largest cost.
func (s sourceAcc) merge(o sourceAcc) {
	for ip, c := range o {
		if g := s[ip]; g != nil {
			g.messages, g.pass, g.fail = g.messages+c.messages, g.pass+c.pass, g.fail+c.fail
			continue
		}
		g := *c
		s[ip] = &g
	}
}

// mergeCounts adds a report's sources into s. The counts of its new
// sources are allocated together: the single writer made an object per
// source of every report.
func (s sourceAcc) mergeCounts(o []ipCount) {
	var slab []sourceCount
	for i := range o {
		c := &o[i]
		if g := s[c.ip]; g != nil {
			g.messages, g.pass, g.fail = g.messages+c.messages, g.pass+c.pass, g.fail+c.fail
			continue
		}
		if slab == nil {
			slab = make([]sourceCount, 0, len(o)-i)
		}
		slab = append(slab, c.sourceCount)
		s[c.ip] = &slab[len(slab)-1]
	}
}

// sortedSources returns the sources, most messages first, ties by IP.
func (s sourceAcc) sorted() []SourceStats {
	out := make([]SourceStats, 0, len(s))
	for ip, c := range s {
		out = append(out, SourceStats{SourceIP: ip, Messages: c.messages, DMARCPass: c.pass, DMARCFail: c.fail,
			CountryCode: c.cc, ASN: c.asn, ASOrg: c.asOrg})
	}
	slices.SortFunc(out, func(x, y SourceStats) int {
		return cmp.Or(cmp.Compare(y.Messages, x.Messages), cmp.Compare(x.SourceIP, y.SourceIP))
	})
	return out
}

// prune drops all but the keep sources with the most messages.
func (s sourceAcc) prune(keep int) {
	if len(s) <= keep {
		return
	}
	for _, x := range s.sorted()[keep:] {
		delete(s, x.SourceIP)
	}
}

// dayRollup is one domain's sums for one UTC day.
type dayRollup struct {
	reports int64
	sum     *summaryAcc
	src     sourceAcc
	size    int // bytes of its last encoding, to size the next one
}

func newDayRollup() *dayRollup {
	return &dayRollup{sum: newSummaryAcc(), src: make(sourceAcc)}
}

// appendDayRollup encodes r: version, reports, summary, sources.
func appendDayRollup(e enc, r *dayRollup) enc {
	e = append(e, codecVersion)
	e = e.varint(r.reports)
	s := r.sum.summary()
	e = appendSummary(e, &s)
	e = e.uvarint(uint64(len(r.src)))
	for ip, c := range r.src {
		e = e.str(ip).varint(c.messages).varint(c.pass).varint(c.fail).opt(c.cc).optU32(c.asn).opt(c.asOrg)
	}
	return e
}

// decodeDayRollup reads what appendDayRollup wrote.
func decodeDayRollup(raw []byte) (*dayRollup, error) {
	d := &dec{b: raw}
	if d.byte() != codecVersion {
		return nil, errCorrupt
	}
	r := &dayRollup{reports: d.varint(), size: len(raw)}
	s := decodeSummary(d)
	r.sum = accOf(&s)
	n := d.count()
	r.src = make(sourceAcc, n)
	for range n {
		ip := d.str()
		r.src[ip] = &sourceCount{messages: d.varint(), pass: d.varint(), fail: d.varint(), cc: d.opt(), asn: d.optU32(), asOrg: d.opt()}
	}
	if !d.ok() || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return r, nil
}

// dayNumber is the UTC day of t in days since 1970 (0 for earlier times).
func dayNumber(t time.Time) uint32 {
	s := t.Unix()
	if s < 0 {
		return 0
	}
	return uint32(min(s/86400, math.MaxUint32))
}

func dayTime(day uint32) time.Time { return time.Unix(int64(day)*86400, 0).UTC() }

// ReportStatistics returns the summary stored with report id of
// organization orgID. ErrNotFound as FindReport.
func (db *DB) ReportStatistics(orgID, id string) (*ReportStats, error) {
	var st *ReportStats
	err := db.bolt.View(func(tx *bolt.Tx) error {
		rec, sum, err := getOrgReport(tx, orgID, id, true)
		if err != nil {
			return err
		}
		st = &ReportStats{ReportID: rec.ID, Summary: *sum}
		return nil
	})
	if err != nil {
		return nil, wrap("report statistics", err)
	}
	return st, nil
}

// DomainStatistics returns the statistics of domain domainID of
// organization orgID over the UTC days from..to (both truncated to their
// UTC day, both included), read from the per-day roll-ups written at
// ingest. A report counts on the UTC day of its date_begin. ByDay has every
// day of the range, zeros included, oldest first; TopSources the 20 sources
// with the most messages (see MaxDaySources). Errors: ErrNotFound when the
// domain is not the organization's, ErrInvalid when to is before from or
// the range is longer than 366 days.
func (db *DB) DomainStatistics(orgID, domainID string, from, to time.Time) (*DomainStats, error) {
	fromDay, toDay := dayNumber(from), dayNumber(to)
	if toDay < fromDay {
		return nil, errorf(ErrInvalid, "date_to is before date_from")
	}
	if toDay-fromDay >= maxStatsDays {
		return nil, errorf(ErrInvalid, "date range is longer than %d days", maxStatsDays)
	}
	st := &DomainStats{DomainID: domainID, DateFrom: dayTime(fromDay), DateTo: dayTime(toDay),
		ByDay: make([]DayStats, 0, toDay-fromDay+1), TopSources: []SourceStats{}}
	total := newDayRollup()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		return eachRollup(tx, domainID, fromDay, toDay, func(day uint32, r *dayRollup) {
			for uint32(len(st.ByDay)) < day-fromDay {
				st.ByDay = append(st.ByDay, emptyDay(fromDay+uint32(len(st.ByDay))))
			}
			st.ByDay = append(st.ByDay, DayStats{Date: dayTime(day).Format(time.DateOnly),
				Messages: r.sum.messages, DMARCPass: r.sum.dmarcPass, DMARCFail: r.sum.dmarcFail, Reports: int(r.reports)})
			total.reports += r.reports
			total.sum.merge(r.sum)
			total.src.merge(r.src)
		})
	})
	if err != nil {
		return nil, wrap("domain statistics", err)
	}
	for uint32(len(st.ByDay)) <= toDay-fromDay {
		st.ByDay = append(st.ByDay, emptyDay(fromDay+uint32(len(st.ByDay))))
	}
	st.Summary = total.sum.summary()
	st.ReportCount = int(total.reports)
	if top := total.src.sorted(); len(top) > 0 {
		st.TopSources = top[:min(len(top), topSources)]
	}
	return st, nil
}

func emptyDay(day uint32) DayStats { return DayStats{Date: dayTime(day).Format(time.DateOnly)} }

// eachRollup calls fn for every roll-up of the domain from fromDay to toDay.
func eachRollup(tx *bolt.Tx, domainID string, fromDay, toDay uint32, fn func(uint32, *dayRollup)) error {
	prefix := []byte(domainID)
	c := tx.Bucket(bucketRollups).Cursor()
	for k, v := c.Seek(rollupKey(domainID, fromDay)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(k) != len(prefix)+4 {
			return fmt.Errorf("roll-up key of length %d: %w", len(k), errCorrupt)
		}
		day := binary.BigEndian.Uint32(k[len(prefix):])
		if day > toDay {
			break
		}
		r, err := decodeDayRollup(v)
		if err != nil {
			return fmt.Errorf("roll-up of domain %s day %d: %w", domainID, day, err)
		}
		fn(day, r)
	}
	return nil
}
