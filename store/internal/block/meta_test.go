package block

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/reports"
)

func randReport(r *rand.Rand, i int) reports.Report {
	t := func() time.Time {
		switch r.IntN(6) {
		case 0:
			return time.Time{}
		case 1:
			return time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9)).UTC()
		}
		return time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(86400*300)) * time.Second)
	}
	id := fmt.Sprintf("0190%04x-%04x-7%03x-8%03x-%012x", i, r.IntN(1<<16), r.IntN(1<<12), r.IntN(1<<12), r.Int64N(1<<48))
	switch r.IntN(8) {
	case 0:
		id = pick(r, hostile)
	case 1:
		id = "0190ABCD-0000-7000-8000-000000000000" // upper case: kept as text
	}
	return reports.Report{
		ID: id, DomainID: "0190aaaa-0000-7000-8000-000000000001", Domain: pick(r, []string{"example.com", "", "ex.test"}),
		OrgID: "0190bbbb-0000-7000-8000-000000000001", OrgName: pick(r, hostile), OrgEmail: pick(r, hostile),
		ExternalReportID: fmt.Sprint(r.Uint64()) + pick(r, hostile),
		DateBegin:        t(), DateEnd: t(), ReceivedAt: t(),
		PolicyPublished: reports.PolicyPublished{Domain: pick(r, hostile), P: pick(r, hostile), SP: optOf(r, hostile),
			NP: optOf(r, hostile), PCT: int(randCount(r)), ADKIM: pick(r, []string{"r", "s", "", "x"}), ASPF: pick(r, []string{"r", "s"})},
		MessageCount: randCount(r), DMARCPassCount: randCount(r), DMARCFailCount: randCount(r), RecordCount: int(randCount(r)),
	}
}

// TestReportsRoundTrip ensures a table of report metadata comes back
// exactly, in its order, times to the nanosecond in UTC.
func TestReportsRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		list := make([]reports.Report, r.IntN(200))
		if seed == 0 {
			list = nil
		}
		for i := range list {
			list[i] = randReport(r, i)
		}
		enc := EncodeReports([]byte{1, 2}, list)
		if enc[0] != 1 || enc[1] != 2 {
			t.Fatal("EncodeReports did not append to dst")
		}
		got, err := DecodeReports(enc[2:])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(list) {
			t.Fatalf("%d reports, want %d", len(got), len(list))
		}
		for i := range list {
			if !reflect.DeepEqual(got[i], list[i]) {
				t.Fatalf("report %d:\n got %+v\nwant %+v", i, got[i], list[i])
			}
		}
		// The pointers are the caller's: changing one changes no other.
		for i := range got {
			if p := got[i].PolicyPublished.SP; p != nil {
				*p = "changed"
				for k := range got[i+1:] {
					if q := got[i+1+k].PolicyPublished.SP; q != nil && *q == "changed" {
						t.Fatal("reports share a policy string pointer")
					}
				}
				break
			}
		}
	}
}

// TestReportsCorrupt ensures damaged report tables are errors.
func TestReportsCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	list := []reports.Report{randReport(r, 0), randReport(r, 1)}
	list[0].ExternalReportID, list[1].ExternalReportID, list[0].OrgName, list[1].OrgName = "a", "b", "o", "p"
	list[0].OrgEmail, list[1].OrgEmail = "e", "f"
	enc := EncodeReports(nil, list)
	for i := range enc {
		if _, err := DecodeReports(enc[:i]); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d: %v", i, err)
		}
	}
	_, p, err := open(enc, kindReports)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		_, _ = decodeReportsPayload(p[:i])
		for _, x := range []byte{0, 1, 0x7f, 0x80, 0xff} {
			q := slices.Clone(p)
			q[i] = x
			_, _ = decodeReportsPayload(q)
		}
	}
	if _, err := decodeReportsPayload(p[:len(p)-1]); err == nil {
		t.Error("a payload cut by one byte decoded")
	}
}
