package reports

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

func fullRecord() *Record {
	return &Record{
		SourceIP: "2001:db8::1", Count: 42, Disposition: "quarantine", DKIM: "pass", SPF: "weird-Value",
		HeaderFrom: "example.com", EnvelopeFrom: new("bounce.example.com"), EnvelopeTo: new("example.net"),
		Reasons: []Reason{{Type: "forwarded", Comment: new("via list")}, {Type: "local_policy"}},
		AuthResults: AuthResults{
			DKIM: []DKIMAuth{{Domain: "example.com", Selector: new("s1"), Result: "pass"}, {Domain: "x.test", Result: "hardfail"}},
			SPF:  []SPFAuth{{Domain: "example.com", Scope: new("mfrom"), Result: "softfail"}},
		},
		Geo: &Geo{CountryCode: new("GB"), CountryName: new("United Kingdom"), City: new("London"),
			Latitude: new(51.5142), Longitude: new(-0.0931), ASN: new(uint32(20712)), ASOrg: new("Andrews & Arnold")},
	}
}

// TestRecordCodec ensures a record survives encoding with every field,
// optional fields absent, unknown enumerated values and partial geo data,
// and that DMARC is derived from DKIM and SPF.
func TestRecordCodec(t *testing.T) {
	minimal := &Record{SourceIP: "192.0.2.1", DKIM: "fail", SPF: "fail", Reasons: []Reason{},
		AuthResults: AuthResults{DKIM: []DKIMAuth{}, SPF: []SPFAuth{}}}
	partial := fullRecord()
	partial.Geo = &Geo{ASN: new(uint32(0))}
	for name, r := range map[string]*Record{"full": fullRecord(), "minimal": minimal, "partial geo": partial} {
		t.Run(name, func(t *testing.T) {
			got, err := decodeRecord(AppendRecord(nil, r))
			if err != nil {
				t.Fatal(err)
			}
			want := *r
			want.DMARC = dmarcResult(r.DKIM, r.SPF)
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("decoded %+v\nwant    %+v", got, &want)
			}
		})
	}
}

// TestRecordCodecCorrupt ensures every truncation of an encoded record, and
// trailing bytes, are reported as corrupt rather than decoded wrongly.
func TestRecordCodecCorrupt(t *testing.T) {
	raw := AppendRecord(nil, fullRecord())
	for i := range raw {
		if _, err := decodeRecord(raw[:i]); err == nil {
			t.Errorf("truncated to %d bytes: decoded", i)
		}
	}
	if _, err := decodeRecord(append(raw, 0)); err == nil {
		t.Errorf("trailing byte: decoded")
	}
	bad := append([]byte{}, raw...)
	bad[0] = 99
	if _, err := decodeRecord(bad); err == nil {
		t.Errorf("unknown version: decoded")
	}
}

// TestReportCodec ensures a report and its summary survive encoding.
func TestReportCodec(t *testing.T) {
	r := &Report{DomainID: "00000000-0000-7000-8000-000000000001", Domain: "example.com", OrgID: "00000000-0000-7000-8000-000000000001", OrgName: "google.com",
		OrgEmail: "noreply@google.com", ExternalReportID: "123", DateBegin: time.Unix(1700000000, 0).UTC(),
		DateEnd: time.Unix(1700086399, 0).UTC(), ReceivedAt: time.Unix(1700090000, 0).UTC(),
		PolicyPublished: PolicyPublished{Domain: "example.com", P: "reject", SP: new("none"), PCT: 50, ADKIM: "s", ASPF: "r"},
		MessageCount:    42, DMARCPassCount: 42, RecordCount: 1}
	acc := NewSummaryAcc()
	acc.Add(fullRecord())
	acc.Add(&Record{SourceIP: "192.0.2.1", Count: 3, DKIM: "fail", SPF: "fail", Disposition: "reject"})
	s := acc.Summary()
	got, gotSum, err := DecodeReport("id", AppendReport(nil, r, &s), true)
	if err != nil {
		t.Fatal(err)
	}
	want := *r
	want.ID = "id"
	if !reflect.DeepEqual(got, &want) || !reflect.DeepEqual(gotSum, &s) {
		t.Errorf("decoded %+v %+v\nwant    %+v %+v", got, gotSum, &want, &s)
	}
	if s.MessageCount != 45 || s.Disposition.Reject != 3 || s.DMARC.PassRate != 0.9333 || len(s.ByASN) != 2 || s.ByASN[1].ASN != nil {
		t.Errorf("summary %+v", s)
	}
}

// TestDayRollupCodec ensures a roll-up survives encoding and that pruning
// caps its sources at MaxDaySources, keeping those with the most messages.
func TestDayRollupCodec(t *testing.T) {
	r := NewDayRollup()
	add := NewDayRollup()
	add.Reports = 2
	for i := range MaxDaySources + 50 {
		rec := &Record{SourceIP: "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256), Count: int64(i + 1), DKIM: "pass"}
		add.Sum.Add(rec)
		add.Src.Add(rec.SourceIP, SourceCount{Messages: rec.Count, Pass: rec.Count})
	}
	r.Reports += add.Reports
	r.Sum.Merge(add.Sum)
	r.Src.Merge(add.Src)
	r.Src.Prune(MaxDaySources)
	if len(r.Src) != MaxDaySources || r.Src["10.0.0.0"] != nil || r.Src["10.0.4.25"] == nil {
		t.Fatalf("kept %d sources; smallest kept: %v", len(r.Src), r.Src["10.0.0.0"])
	}
	got, err := DecodeDayRollup(AppendDayRollup(nil, r))
	if err != nil {
		t.Fatal(err)
	}
	if got.Reports != 2 || !reflect.DeepEqual(got.Src, r.Src) || !reflect.DeepEqual(got.Sum.Summary(), r.Sum.Summary()) {
		t.Errorf("decoded roll-up differs")
	}
}

// FuzzDecode ensures the decoders of stored values never panic or allocate
// without bound on damaged bytes, and round-trip what they accept.
func FuzzDecode(f *testing.F) {
	f.Add(AppendRecord(nil, fullRecord()))
	r := NewDayRollup()
	r.Sum.Add(fullRecord())
	r.Src.Add("192.0.2.1", SourceCount{Messages: 3})
	f.Add([]byte(AppendDayRollup(nil, r)))
	s := r.Sum.Summary()
	f.Add([]byte(AppendReport(nil, &Report{DomainID: "d", OrgName: "o"}, &s)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if rec, err := decodeRecord(raw); err == nil {
			again, err := decodeRecord(AppendRecord(nil, rec))
			if err != nil || !reflect.DeepEqual(again, rec) {
				t.Fatalf("record does not round-trip: %+v / %+v (%v)", rec, again, err)
			}
		}
		_ = DecodeBlock(raw, func(*Record) error { return nil })
		_, _ = DecodeDayRollup(raw)
		_, _, _ = DecodeReport("id", raw, true)
	})
}

// decodeRecord decodes a value written by AppendRecord, as a record block
// decodes each of its records.
func decodeRecord(raw []byte) (*Record, error) {
	d := codec.NewStringDec(raw)
	return decodeRecordFrom(&d)
}
