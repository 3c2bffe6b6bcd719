package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// TestReportRecordsAcrossBatches ensures ReportRecords, which reads in
// short transactions, returns every record once and in order for a report
// larger than several batches, and stops with ErrNotFound when the report
// is deleted between batches.
func TestReportRecordsAcrossBatches(t *testing.T) {
	e := newReportEnv(t)
	const n = 10_000 // two full batches of 4096 and a partial one
	d := mustDraft(t, e.db, e.dom, "big", reportDay(3), n)
	if outs := e.commit(t, &store.IngestBatch{Reports: []*store.ReportDraft{d}}); !outs[0].Stored {
		t.Fatalf("not stored: %+v", outs)
	}
	var got []string
	err := e.db.ReportRecords(e.org.ID, d.ID(), func(r *store.Record) error {
		got = append(got, fmt.Sprintf("%s/%d", r.SourceIP, r.Count))
		return nil
	})
	if err != nil || len(got) != n {
		t.Fatalf("%d records, %v; want %d", len(got), err, n)
	}
	for i, g := range got {
		want := testRecord(i)
		if g != fmt.Sprintf("%s/%d", want.SourceIP, want.Count) {
			t.Fatalf("record %d is %s, want %s/%d: lost, repeated or out of order at a batch edge", i, g, want.SourceIP, want.Count)
		}
	}

	count := 0
	err = e.db.ReportRecords(e.org.ID, d.ID(), func(*store.Record) error {
		if count++; count == 100 {
			if err := e.db.DeleteDomain(e.org.ID, e.dom.ID); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if !errors.Is(err, store.ErrNotFound) || count != 4096 {
		t.Fatalf("after deletion mid-stream: %d records, %v; want the first batch then ErrNotFound", count, err)
	}
}
