package block

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/aggregate"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// hostile are strings a report may carry: empty, control bytes, invalid
// UTF-8, long, look-alikes of enumerated values and of addresses.
var hostile = []string{
	"", "pass", "PASS", "fail", "none", " pass", "pass\x00", "\x00", "\xff\xfe", "ünïcødé.example",
	"quarantine", "reject", "mfrom", "helo", "forwarded", "weird-Value", "\n\r\t",
	strings.Repeat("x", 300), strings.Repeat("é", 70000), "example.com", "EXAMPLE.COM.", "1.2.3.4",
}

func pick(r *rand.Rand, list []string) string { return list[r.IntN(len(list))] }

func optOf(r *rand.Rand, list []string) *string {
	if r.IntN(3) == 0 {
		return nil
	}
	return new(pick(r, list))
}

// randIP returns addresses of every kind the codec tells apart.
func randIP(r *rand.Rand) string {
	switch r.IntN(12) {
	case 0:
		var b [16]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return netip.AddrFrom16(b).String()
	case 1:
		return fmt.Sprintf("2001:db8::%x", r.IntN(50))
	case 2:
		return fmt.Sprintf("::ffff:198.51.100.%d", r.IntN(256))
	case 3:
		return pick(r, []string{"", "not an address", "01.2.3.4", "2001:DB8::1", "fe80::1%eth0", "2001:db8:0:0:0:0:0:1", "0.0.0.0", "::", "255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"})
	case 4, 5:
		return fmt.Sprintf("192.0.2.%d", r.IntN(4)) // repeats
	}
	return netip.AddrFrom4([4]byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}).String()
}

func randCount(r *rand.Rand) int64 {
	switch r.IntN(8) {
	case 0:
		return math.MaxInt64
	case 1:
		return math.MinInt64
	case 2:
		return -r.Int64N(1000)
	case 3:
		return 0
	}
	return r.Int64N(1 << uint(r.IntN(62)+1))
}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(6) {
	case 0:
		return math.Float64frombits(0x7ff8000000000001 + r.Uint64N(1000)) // NaNs with payloads
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return math.Inf(-1)
	}
	return r.NormFloat64() * 90
}

func randGeo(r *rand.Rand) *reports.Geo {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return &reports.Geo{} // present, every field unknown
	}
	g := &reports.Geo{CountryCode: optOf(r, []string{"GB", "US", ""}), CountryName: optOf(r, hostile),
		City: optOf(r, hostile), ASOrg: optOf(r, hostile)}
	if r.IntN(3) > 0 {
		g.Latitude = new(randFloat(r))
	}
	if r.IntN(3) > 0 {
		g.Longitude = new(randFloat(r))
	}
	if r.IntN(3) > 0 {
		g.ASN = new(uint32(r.Uint32() >> uint(r.IntN(32))))
	}
	return g
}

// randRecord returns a record of any shape.
func randRecord(r *rand.Rand) reports.Record {
	rec := reports.Record{
		SourceIP: randIP(r), Count: randCount(r), Disposition: pick(r, hostile),
		DKIM: reports.Verdict(pick(r, hostile)), SPF: reports.Verdict(pick(r, hostile)), DMARC: pick(r, hostile),
		DMARCDerived: r.IntN(2) == 0, HeaderFrom: pick(r, hostile),
		EnvelopeFrom: optOf(r, hostile), EnvelopeTo: optOf(r, hostile), Geo: randGeo(r),
	}
	if n := r.IntN(5) - 1; n >= 0 {
		rec.Reasons = make([]reports.Reason, n)
		for i := range rec.Reasons {
			rec.Reasons[i] = reports.Reason{Type: pick(r, hostile), Comment: optOf(r, hostile)}
		}
	}
	if n := r.IntN(5) - 1; n >= 0 {
		rec.AuthResults.DKIM = make([]reports.DKIMAuth, n)
		for i := range rec.AuthResults.DKIM {
			rec.AuthResults.DKIM[i] = reports.DKIMAuth{Domain: pick(r, hostile), Selector: optOf(r, hostile), Result: pick(r, hostile)}
		}
	}
	if n := r.IntN(5) - 1; n >= 0 {
		rec.AuthResults.SPF = make([]reports.SPFAuth, n)
		for i := range rec.AuthResults.SPF {
			rec.AuthResults.SPF[i] = reports.SPFAuth{Domain: pick(r, hostile), Scope: optOf(r, hostile), Result: pick(r, hostile)}
		}
	}
	return rec
}

// randBlock returns nReports ids and rows spread over them, each report's
// indexes 0..k-1 in a shuffled order of rows.
func randBlock(r *rand.Rand, nReports, nRows int) ([][16]byte, []Row) {
	ids := make([][16]byte, nReports)
	for i := range ids {
		for k := range ids[i] {
			ids[i][k] = byte(r.Uint32())
		}
	}
	rows := make([]Row, nRows)
	next := make([]uint32, nReports)
	for i := range rows {
		rep := uint32(r.IntN(nReports))
		rows[i] = Row{Report: rep, Index: next[rep], Rec: randRecord(r)}
		next[rep]++
	}
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	return ids, rows
}

// recordDiff describes how two records differ ("" when they are equal):
// every field, pointers by presence and value, floats by their bits,
// lists by nil-ness too.
func recordDiff(a, b *reports.Record) string {
	var d []string
	eq := func(name string, x, y any) {
		if x != y {
			d = append(d, fmt.Sprintf("%s: %q != %q", name, x, y))
		}
	}
	opt := func(name string, x, y *string) {
		if (x == nil) != (y == nil) || x != nil && *x != *y {
			d = append(d, fmt.Sprintf("%s: %v != %v", name, show(x), show(y)))
		}
	}
	eq("source_ip", a.SourceIP, b.SourceIP)
	eq("count", a.Count, b.Count)
	eq("disposition", a.Disposition, b.Disposition)
	eq("dkim", a.DKIM, b.DKIM)
	eq("spf", a.SPF, b.SPF)
	eq("dmarc", a.DMARC, b.DMARC)
	eq("derived", a.DMARCDerived, b.DMARCDerived)
	eq("header_from", a.HeaderFrom, b.HeaderFrom)
	opt("envelope_from", a.EnvelopeFrom, b.EnvelopeFrom)
	opt("envelope_to", a.EnvelopeTo, b.EnvelopeTo)
	eq("reasons nil", a.Reasons == nil, b.Reasons == nil)
	eq("dkim nil", a.AuthResults.DKIM == nil, b.AuthResults.DKIM == nil)
	eq("spf nil", a.AuthResults.SPF == nil, b.AuthResults.SPF == nil)
	if len(a.Reasons) != len(b.Reasons) || len(a.AuthResults.DKIM) != len(b.AuthResults.DKIM) || len(a.AuthResults.SPF) != len(b.AuthResults.SPF) {
		return strings.Join(append(d, "list lengths"), "; ")
	}
	for i := range a.Reasons {
		eq("reason type", a.Reasons[i].Type, b.Reasons[i].Type)
		opt("reason comment", a.Reasons[i].Comment, b.Reasons[i].Comment)
	}
	for i := range a.AuthResults.DKIM {
		x, y := &a.AuthResults.DKIM[i], &b.AuthResults.DKIM[i]
		eq("dkim domain", x.Domain, y.Domain)
		opt("dkim selector", x.Selector, y.Selector)
		eq("dkim result", x.Result, y.Result)
	}
	for i := range a.AuthResults.SPF {
		x, y := &a.AuthResults.SPF[i], &b.AuthResults.SPF[i]
		eq("spf domain", x.Domain, y.Domain)
		opt("spf scope", x.Scope, y.Scope)
		eq("spf result", x.Result, y.Result)
	}
	eq("geo nil", a.Geo == nil, b.Geo == nil)
	if a.Geo != nil && b.Geo != nil {
		x, y := a.Geo, b.Geo
		opt("country_code", x.CountryCode, y.CountryCode)
		opt("country_name", x.CountryName, y.CountryName)
		opt("city", x.City, y.City)
		opt("as_org", x.ASOrg, y.ASOrg)
		f := func(name string, p, q *float64) {
			if (p == nil) != (q == nil) || p != nil && math.Float64bits(*p) != math.Float64bits(*q) {
				d = append(d, name)
			}
		}
		f("latitude", x.Latitude, y.Latitude)
		f("longitude", x.Longitude, y.Longitude)
		if (x.ASN == nil) != (y.ASN == nil) || x.ASN != nil && *x.ASN != *y.ASN {
			d = append(d, "asn")
		}
	}
	return strings.Join(d, "; ")
}

func show(s *string) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *s)
}

// checkRows fails t unless got holds exactly the rows of want (in any
// order: a block keeps its own).
func checkRows(t testing.TB, got, want []Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	byRef := func(rows []Row) []*Row {
		out := make([]*Row, len(rows))
		for i := range rows {
			out[i] = &rows[i]
		}
		slices.SortStableFunc(out, func(a, b *Row) int {
			return cmp.Or(cmp.Compare(a.Report, b.Report), cmp.Compare(a.Index, b.Index))
		})
		return out
	}
	g, w := byRef(got), byRef(want)
	bad := 0
	for i := range g {
		if g[i].Report != w[i].Report || g[i].Index != w[i].Index {
			t.Fatalf("row %d is report %d index %d, want %d %d", i, g[i].Report, g[i].Index, w[i].Report, w[i].Index)
		}
		if diff := recordDiff(&g[i].Rec, &w[i].Rec); diff != "" {
			t.Errorf("report %d index %d: %s", w[i].Report, w[i].Index, diff)
			if bad++; bad > 5 {
				t.FailNow()
			}
		}
	}
}

// roundTrip encodes and decodes, and checks every way of reading back.
func roundTrip(t testing.TB, ids [][16]byte, rows []Row) []byte {
	t.Helper()
	before := slices.Clone(rows)
	enc, err := Encode([]byte("prefix"), ids, rows)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatal("Encode did not append to dst")
	}
	enc = enc[len("prefix"):]
	for i := range rows {
		if rows[i].Report != before[i].Report || rows[i].Index != before[i].Index {
			t.Fatal("Encode reordered its input")
		}
	}
	b, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != len(rows) || !slices.Equal(b.Reports(), ids) && len(ids) > 0 {
		t.Fatalf("%d rows, reports %x; want %d, %x", b.Len(), b.Reports(), len(rows), ids)
	}
	got, err := b.Rows()
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, got, rows)
	checkRuns(t, enc, ids, rows)
	for i, id := range ids {
		if k, ok := b.Find(id); !ok || ids[k] != id || int(k) > i {
			t.Fatalf("Find(report %d) = %d, %v", i, k, ok)
		}
	}
	// Each: the same rows, in the same order as Rows.
	i := 0
	if err := b.Each(func(r *Row) error {
		if r.Report != got[i].Report || r.Index != got[i].Index || recordDiff(&r.Rec, &got[i].Rec) != "" {
			t.Fatalf("Each row %d differs from Rows", i)
		}
		i++
		return nil
	}); err != nil || i != len(rows) {
		t.Fatalf("Each: %v after %d rows", err, i)
	}
	return enc
}

// genRows returns the rows of n generated reports of m records each, as
// the store has them after ingest (the converter of ingest, DMARC
// derived as the store does): the benchmarks' realistic input.
func genRows(tb testing.TB, seed0, n, m int) ([][16]byte, []Row) {
	return genReports(tb, seed0, n, m, time.Time{})
}

// genReports is genRows of reports of day begin (zero: each seed's own).
func genReports(tb testing.TB, seed0, n, m int, begin time.Time) ([][16]byte, []Row) {
	ids := make([][16]byte, n)
	var rows []Row
	base := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		seed := int64(seed0 + i)
		// UUIDv7-like ids a few milliseconds apart.
		ms := uint64(base.UnixMilli()) + uint64(i)*7
		for k := range 6 {
			ids[i][k] = byte(ms >> (40 - 8*k))
		}
		rnd := rand.New(rand.NewPCG(uint64(seed), 1))
		for k := 6; k < 16; k++ {
			ids[i][k] = byte(rnd.Uint32())
		}
		ids[i][6] = 0x70 | ids[i][6]&0x0f
		xml := reportgen.Generate(seed, m, reportgen.Options{Begin: begin})
		_, recs, err := aggregate.Parse(bytes.NewReader(xml), container.Limits{})
		if err != nil {
			tb.Fatal(err)
		}
		for k := range recs {
			rows = append(rows, Row{Report: uint32(i), Index: uint32(k), Rec: convert(&recs[k])})
		}
	}
	return ids, rows
}

// convert is ingest's conversion of a parsed record (ingest_job.go add).
func convert(r *aggregate.Record) reports.Record {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	rec := reports.Record{SourceIP: r.SourceIP.String(), Count: r.Count, Disposition: r.Disposition,
		DKIM: reports.Verdict(r.DKIM), SPF: reports.Verdict(r.SPF), HeaderFrom: r.HeaderFrom,
		EnvelopeFrom: opt(r.EnvelopeFrom), EnvelopeTo: opt(r.EnvelopeTo),
		Reasons: []reports.Reason{}, AuthResults: reports.AuthResults{DKIM: []reports.DKIMAuth{}, SPF: []reports.SPFAuth{}}}
	for _, x := range r.Reasons {
		rec.Reasons = append(rec.Reasons, reports.Reason{Type: x.Type, Comment: opt(x.Comment)})
	}
	for _, x := range r.DKIMResults {
		rec.AuthResults.DKIM = append(rec.AuthResults.DKIM, reports.DKIMAuth{Domain: x.Domain, Selector: opt(x.Selector), Result: x.Result})
	}
	for _, x := range r.SPFResults {
		rec.AuthResults.SPF = append(rec.AuthResults.SPF, reports.SPFAuth{Domain: x.Domain, Scope: opt(x.Scope), Result: x.Result})
	}
	rec.DMARC = "fail"
	if rec.DKIM == "pass" || rec.SPF == "pass" {
		rec.DMARC = "pass"
	}
	return rec
}

// checkRuns ensures the runs of a block's header are exactly its rows'
// reports and indexes, in order, ids included.
func checkRuns(t testing.TB, enc []byte, ids [][16]byte, rows []Row) {
	t.Helper()
	var want []uint64
	for _, r := range rows {
		want = append(want, uint64(r.Report)<<32|uint64(r.Index))
	}
	slices.Sort(want)
	var got []uint64
	lastRep, lastEnd := -1, uint64(0)
	err := ScanRuns(enc, func(rep uint32, id [16]byte, first, count uint32) error {
		if int(rep) >= len(ids) || ids[rep] != id {
			t.Fatalf("run of report %d: id %x", rep, id)
		}
		if count == 0 || int(rep) < lastRep || int(rep) == lastRep && uint64(first) < lastEnd {
			t.Fatalf("run of report %d at %d (%d) out of order", rep, first, count)
		}
		lastRep, lastEnd = int(rep), uint64(first)+uint64(count)
		for i := range uint64(count) {
			got = append(got, uint64(rep)<<32|(uint64(first)+i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("runs cover %d rows, want %d (or other ones)", len(got), len(want))
	}
}
