package block

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

func full() reports.Record {
	return reports.Record{
		SourceIP: "2001:db8::1", Count: 42, Disposition: "quarantine", DKIM: "pass", SPF: "weird-Value", DMARC: "pass",
		HeaderFrom: "example.com", EnvelopeFrom: new("bounce.example.com"), EnvelopeTo: new("example.net"),
		Reasons: []reports.Reason{{Type: "forwarded", Comment: new("via list")}, {Type: "local_policy"}},
		AuthResults: reports.AuthResults{
			DKIM: []reports.DKIMAuth{{Domain: "example.com", Selector: new("s1"), Result: "pass"}, {Domain: "x.test", Result: "hardfail"}},
			SPF:  []reports.SPFAuth{{Domain: "example.com", Scope: new("mfrom"), Result: "softfail"}},
		},
		Geo: &reports.Geo{CountryCode: new("GB"), CountryName: new("United Kingdom"), City: new("London"),
			Latitude: new(51.5142), Longitude: new(-0.0931), ASN: new(uint32(20712)), ASOrg: new("Andrews & Arnold")},
	}
}

// TestRoundTrip ensures each field of a record survives a block exactly:
// nil and empty lists and strings, unknown enumerated values, addresses of
// every form, extreme counts, geo absent, empty or partial, float bits.
func TestRoundTrip(t *testing.T) {
	cases := map[string]func(r *reports.Record){
		"full": func(*reports.Record) {},
		"nil lists": func(r *reports.Record) {
			r.Reasons, r.AuthResults.DKIM, r.AuthResults.SPF = nil, nil, nil
		},
		"empty lists": func(r *reports.Record) {
			r.Reasons, r.AuthResults.DKIM, r.AuthResults.SPF = []reports.Reason{}, []reports.DKIMAuth{}, []reports.SPFAuth{}
		},
		"empty strings": func(r *reports.Record) {
			r.Disposition, r.DKIM, r.SPF, r.DMARC, r.HeaderFrom = "", "", "", "", ""
			r.EnvelopeFrom, r.EnvelopeTo = new(""), new("")
			r.Reasons = []reports.Reason{{Type: "", Comment: new("")}}
		},
		"nil pointers": func(r *reports.Record) {
			r.EnvelopeFrom, r.EnvelopeTo = nil, nil
			r.AuthResults.DKIM[0].Selector, r.AuthResults.SPF[0].Scope = nil, nil
			r.Reasons[0].Comment = nil
		},
		"no geo":      func(r *reports.Record) { r.Geo = nil },
		"empty geo":   func(r *reports.Record) { r.Geo = &reports.Geo{} },
		"partial geo": func(r *reports.Record) { r.Geo = &reports.Geo{ASN: new(uint32(0)), City: new("")} },
		"NaN and -0": func(r *reports.Record) {
			r.Geo.Latitude, r.Geo.Longitude = new(math.Float64frombits(0x7ff8dead00000001)), new(math.Copysign(0, -1))
		},
		"max ASN":          func(r *reports.Record) { r.Geo.ASN = new(uint32(math.MaxUint32)) },
		"derived":          func(r *reports.Record) { r.DKIM, r.SPF, r.DMARC, r.DMARCDerived = "", "", "fail", true },
		"huge count":       func(r *reports.Record) { r.Count = math.MaxInt64 },
		"negative count":   func(r *reports.Record) { r.Count = math.MinInt64 },
		"IPv4":             func(r *reports.Record) { r.SourceIP = "192.0.2.1" },
		"IPv4-mapped":      func(r *reports.Record) { r.SourceIP = "::ffff:192.0.2.1" },
		"IPv6 zero":        func(r *reports.Record) { r.SourceIP = "::" },
		"IPv4 zero":        func(r *reports.Record) { r.SourceIP = "0.0.0.0" },
		"uncanonical IPv6": func(r *reports.Record) { r.SourceIP = "2001:DB8::1" },
		"zoned IPv6":       func(r *reports.Record) { r.SourceIP = "fe80::1%eth0" },
		"leading zero v4":  func(r *reports.Record) { r.SourceIP = "192.000.2.1" },
		"no address":       func(r *reports.Record) { r.SourceIP = "" },
		"control bytes":    func(r *reports.Record) { r.HeaderFrom, r.Disposition = "\x00\xff\n", "pass\x00" },
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			rec := full()
			mod(&rec)
			// Alone, and among other rows that share its strings.
			roundTrip(t, [][16]byte{{1}}, []Row{{Rec: rec}})
			other := full()
			other.SourceIP = "192.0.2.7"
			roundTrip(t, [][16]byte{{1}, {2}}, []Row{{Report: 1, Index: 3, Rec: other}, {Report: 0, Index: 0, Rec: rec}, {Report: 1, Index: 0, Rec: rec}})
		})
	}
}

// TestRoundTripGenerated is the property: any rows of any records, in
// blocks of any size, come back exactly.
func TestRoundTripGenerated(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		nReports := 1 + r.IntN(30)
		nRows := r.IntN(3000)
		if seed%5 == 0 {
			nRows = r.IntN(4)
		}
		ids, rows := randBlock(r, nReports, nRows)
		roundTrip(t, ids, rows)
	}
}

// TestRoundTripRealistic runs generated reports through the codec, as
// the store will have them.
func TestRoundTripRealistic(t *testing.T) {
	ids, rows := genRows(t, 1, 30, 40)
	roundTrip(t, ids, rows)
}

// TestEmpty ensures blocks without rows, and without reports, round-trip.
func TestEmpty(t *testing.T) {
	roundTrip(t, nil, nil)
	enc := roundTrip(t, [][16]byte{{9, 8, 7}, {0xff}}, nil)
	b, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Reports(); len(got) != 2 || got[0] != [16]byte{9, 8, 7} || got[1] != [16]byte{0xff} {
		t.Errorf("reports %x", got)
	}
	if err := b.ReportRows(1, func(uint32, *reports.Record) error { t.Error("a row"); return nil }); err != nil {
		t.Error(err)
	}
}

// TestReportRows ensures one report's records come back in their order
// in the report, whatever the order of the block, and no other's.
func TestReportRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	ids, rows := randBlock(r, 5, 400)
	enc, err := Encode(nil, ids, rows)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	for rep := range uint32(5) {
		var want []Row
		for _, row := range rows {
			if row.Report == rep {
				want = append(want, row)
			}
		}
		slices.SortFunc(want, func(x, y Row) int { return int(x.Index) - int(y.Index) })
		var got []Row
		err := b.ReportRows(rep, func(index uint32, rec *reports.Record) error {
			got = append(got, Row{Report: rep, Index: index, Rec: *rec})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("report %d: %d rows, want %d", rep, len(got), len(want))
		}
		for i := range got {
			if got[i].Index != want[i].Index {
				t.Fatalf("report %d: row %d has index %d, want %d", rep, i, got[i].Index, want[i].Index)
			}
			if d := recordDiff(&got[i].Rec, &want[i].Rec); d != "" {
				t.Fatalf("report %d index %d: %s", rep, got[i].Index, d)
			}
		}
	}
	// A range of indexes: those rows only, in order.
	var got []uint32
	if err := b.ReportRange(2, 10, 20, func(index uint32, _ *reports.Record) error {
		got = append(got, index)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []uint32
	for _, row := range rows {
		if row.Report == 2 && row.Index >= 10 && row.Index < 20 {
			want = append(want, row.Index)
		}
	}
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("ReportRange(2, 10, 20): %v, want %v", got, want)
	}
	// An error of fn stops the iteration and comes back.
	stop := errors.New("stop")
	n := 0
	if err := b.ReportRows(0, func(uint32, *reports.Record) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("ReportRows: %v after %d calls", err, n)
	}
	n = 0
	if err := b.Each(func(*Row) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Each: %v after %d calls", err, n)
	}
}

// TestEncodeBadReport ensures a row of a report not in the table is
// refused.
func TestEncodeBadReport(t *testing.T) {
	if _, err := Encode(nil, [][16]byte{{1}}, []Row{{Report: 1, Rec: full()}}); err == nil {
		t.Error("encoded a row of report 1 of 1")
	}
}

// TestLargeBlock round-trips a block of a million rows (one report of a
// million records).
func TestLargeBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("a million rows")
	}
	r := rand.New(rand.NewPCG(11, 11))
	rows := make([]Row, 1_000_000)
	for i := range rows {
		rec := reports.Record{SourceIP: randIP(r), Count: r.Int64N(100), Disposition: "none", DKIM: "pass", SPF: "fail",
			DMARC: "pass", HeaderFrom: "example.com", Reasons: []reports.Reason{},
			AuthResults: reports.AuthResults{DKIM: []reports.DKIMAuth{{Domain: "example.com", Selector: new("s1"), Result: "pass"}}, SPF: []reports.SPFAuth{}}}
		if i%1000 == 0 {
			rec = randRecord(r)
		}
		rows[i] = Row{Index: uint32(i), Rec: rec}
	}
	enc := roundTrip(t, [][16]byte{{1}}, rows)
	t.Logf("%d bytes, %.1f a row", len(enc), float64(len(enc))/float64(len(rows)))
}

// TestCorrupt ensures damaged blocks are errors wrapping ErrCorrupt:
// every truncation, every flipped bit of a small block, trailing bytes,
// another version, a report table read as records.
func TestCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	ids, rows := smallBlock(r, 3, 20)
	enc, err := Encode(nil, ids, rows)
	if err != nil {
		t.Fatal(err)
	}
	bad := func(what string, b []byte) {
		t.Helper()
		if _, err := Decode(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", what, err)
		}
	}
	hdrEnd := 0 // where the header part ends: ScanRuns needs no more
	for i := range enc {
		bad("truncated", enc[:i])
		if err := ScanRuns(enc[:i], func(uint32, [16]byte, uint32, uint32) error { return nil }); err == nil && hdrEnd == 0 {
			hdrEnd = i
		} else if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Errorf("ScanRuns of %d bytes: %v", i, err)
		}
	}
	if hdrEnd == 0 || hdrEnd > len(enc)/2 {
		t.Errorf("ScanRuns needs %d of %d bytes", hdrEnd, len(enc))
	}
	for i := range enc {
		for bit := range 8 {
			b := slices.Clone(enc)
			b[i] ^= 1 << bit
			bad("bit flipped", b)
		}
	}
	bad("trailing byte", append(slices.Clone(enc), 0))
	// The report table is checked by its own checksum.
	h := slices.Clone(enc)
	h[8] ^= 1
	if err := ScanRuns(h, func(uint32, [16]byte, uint32, uint32) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ScanRuns of a damaged header: %v", err)
	}
	v := slices.Clone(enc)
	v[0] = Version + 1
	bad("version", v)
	table, err := EncodeTable(nil, []TableEntry{{ID: [16]byte{1}, Val: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	bad("report table", table)
	if _, err := DecodeTable(enc); !errors.Is(err, ErrCorrupt) {
		t.Errorf("records read as a report table: %v", err)
	}
}

// TestCorruptPayload damages the payload under the checksum (as a bug of
// the encoder would): every truncation and byte changed must be an error
// of Decode or of reading the rows, never a panic or a wrong row count.
func TestCorruptPayload(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	ids, rows := smallBlock(r, 3, 30)
	enc, err := Encode(nil, ids, rows)
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := open(enc, kindRecords)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		readAll(p[:i])
		for _, x := range []byte{0, 1, 0x7f, 0x80, 0xff} {
			q := slices.Clone(p)
			q[i] = x
			readAll(q)
		}
	}
	if _, err := decodePayload(ids, p[:len(p)-1]); err == nil {
		t.Error("a payload cut by one byte decoded")
	}
}

// readAll decodes a payload every way there is; it must not panic.
func readAll(p []byte) {
	b, err := decodePayload([][16]byte{{1}, {2}, {3}}, p)
	if err != nil {
		return
	}
	if rows, err := b.Rows(); err == nil && len(rows) != b.Len() {
		panic("Rows returned a wrong number of rows")
	}
	_ = b.Each(func(*Row) error { return nil })
	for rep := range min(len(b.Reports()), 3) {
		_ = b.ReportRows(uint32(rep), func(uint32, *reports.Record) error { return nil })
	}
}

// smallBlock returns a block of short records that still uses every
// column (the corruption tests try each of its bytes).
func smallBlock(r *rand.Rand, nReports, nRows int) ([][16]byte, []Row) {
	ids := make([][16]byte, nReports)
	rows := make([]Row, nRows)
	for i := range rows {
		rec := full()
		rec.SourceIP, rec.Count = randIP(r), randCount(r)
		switch i % 4 {
		case 0:
			rec.Reasons, rec.AuthResults.DKIM, rec.Geo = nil, []reports.DKIMAuth{}, nil
		case 1:
			rec.DMARCDerived, rec.Geo.Latitude = true, nil
		}
		ids[i%nReports][0] = byte(i)
		rows[i] = Row{Report: uint32(i % nReports), Index: uint32(i), Rec: rec}
	}
	return ids, rows
}

// TestConcurrent encodes and reads one block from several goroutines at
// once (the zstd encoder and decoder are shared; a Block may be cached):
// run with -race.
func TestConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	ids, rows := smallBlock(r, 4, 200)
	enc, err := Encode(nil, ids, rows)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.Rows()
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			again, err := Encode(nil, ids, rows)
			if err == nil && !slices.Equal(again, enc) {
				err = errors.New("Encode is not deterministic")
			}
			if err == nil {
				i := 0
				err = b.Each(func(row *Row) error {
					if d := recordDiff(&row.Rec, &want[i].Rec); d != "" {
						return errors.New(d)
					}
					i++
					return nil
				})
			}
			if err == nil {
				err = b.ReportRows(uint32(g%4), func(uint32, *reports.Record) error { return nil })
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestRepetitive round-trips rows that are all alike, which compress the
// most: the bound Decode puts on a payload's claimed size must hold them.
func TestRepetitive(t *testing.T) {
	rows := make([]Row, 300_000)
	for i := range rows {
		rows[i] = Row{Index: uint32(i), Rec: reports.Record{SourceIP: "192.0.2.1", Count: 1, Disposition: "none",
			DKIM: "pass", SPF: "pass", DMARC: "pass", HeaderFrom: "example.com"}}
	}
	enc := roundTrip(t, [][16]byte{{1}}, rows)
	t.Logf("%d rows alike: %d bytes", len(rows), len(enc))
}
