package store

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
			got, err := decodeRecord(appendRecord(nil, r))
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
	raw := appendRecord(nil, fullRecord())
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
	r := &Report{DomainID: NewID(), Domain: "example.com", OrgID: NewID(), OrgName: "google.com",
		OrgEmail: "noreply@google.com", ExternalReportID: "123", DateBegin: time.Unix(1700000000, 0).UTC(),
		DateEnd: time.Unix(1700086399, 0).UTC(), ReceivedAt: time.Unix(1700090000, 0).UTC(),
		PolicyPublished: PolicyPublished{Domain: "example.com", P: "reject", SP: new("none"), PCT: 50, ADKIM: "s", ASPF: "r"},
		MessageCount:    42, DMARCPassCount: 42, RecordCount: 1}
	acc := newSummaryAcc()
	acc.add(fullRecord())
	acc.add(&Record{SourceIP: "192.0.2.1", Count: 3, DKIM: "fail", SPF: "fail", Disposition: "reject"})
	s := acc.summary()
	got, gotSum, err := decodeReport("id", appendReport(nil, r, &s), true)
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
	r := newDayRollup()
	add := newDayRollup()
	add.reports = 2
	for i := range MaxDaySources + 50 {
		rec := &Record{SourceIP: "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256), Count: int64(i + 1), DKIM: "pass"}
		add.sum.add(rec)
		add.src.add(rec.SourceIP, sourceCount{messages: rec.Count, pass: rec.Count})
	}
	r.reports += add.reports
	r.sum.merge(add.sum)
	r.src.merge(add.src)
	r.src.prune(MaxDaySources)
	if len(r.src) != MaxDaySources || r.src["10.0.0.0"] != nil || r.src["10.0.4.25"] == nil {
		t.Fatalf("kept %d sources; smallest kept: %v", len(r.src), r.src["10.0.0.0"])
	}
	got, err := decodeDayRollup(appendDayRollup(nil, r))
	if err != nil {
		t.Fatal(err)
	}
	if got.reports != 2 || !reflect.DeepEqual(got.src, r.src) || !reflect.DeepEqual(got.sum.summary(), r.sum.summary()) {
		t.Errorf("decoded roll-up differs")
	}
}

// FuzzDecode ensures the decoders of stored values never panic or allocate
// without bound on damaged bytes, and round-trip what they accept.
func FuzzDecode(f *testing.F) {
	f.Add(appendRecord(nil, fullRecord()))
	r := newDayRollup()
	r.sum.add(fullRecord())
	r.src.add("192.0.2.1", sourceCount{messages: 3})
	f.Add([]byte(appendDayRollup(nil, r)))
	s := r.sum.summary()
	f.Add([]byte(appendReport(nil, &Report{DomainID: "d", OrgName: "o"}, &s)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if rec, err := decodeRecord(raw); err == nil {
			again, err := decodeRecord(appendRecord(nil, rec))
			if err != nil || !reflect.DeepEqual(again, rec) {
				t.Fatalf("record does not round-trip: %+v / %+v (%v)", rec, again, err)
			}
		}
		_ = decodeBlock(raw, func(*Record) error { return nil })
		_, _ = decodeDayRollup(raw)
		_, _, _ = decodeReport("id", raw, true)
	})
}

// decodeRecord decodes a value written by appendRecord, as a record block
// decodes each of its records.
func decodeRecord(raw []byte) (*Record, error) {
	d := codec.NewStringDec(raw)
	return decodeRecordFrom(&d)
}
