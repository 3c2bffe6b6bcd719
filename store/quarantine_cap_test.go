package store_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// junk is a mail of n bytes whose header is distinct per seed.
func junk(seed string, n int) []byte {
	head := "From: spam@junk.test\r\nSubject: buy " + seed + "\r\n\r\n"
	return append([]byte(head), bytes.Repeat([]byte("x"), n-len(head))...)
}

func quarantine(t *testing.T, db *store.DB, raw []byte, max int64) (*store.QuarantineEntry, error) {
	t.Helper()
	item := &store.QuarantineItem{Entry: store.QuarantineEntry{Source: "smtp", Name: "a -> b", Reason: "no DMARC report found",
		Size: int64(len(raw)), Recipient: "abc@reports.test"}, Raw: raw, MaxTotal: max}
	_, err := db.NewIngester().Commit(&store.IngestBatch{Quarantine: []*store.QuarantineItem{item}})
	return &item.Entry, err
}

// TestQuarantineCap ensures the quarantine keeps inputs whole up to nine
// tenths of its cap, then only their headers (truncated, and the reason
// says so), then refuses them with ErrQuarantineFull; that an identical
// input is kept once; and that deleting gives the space back.
func TestQuarantineCap(t *testing.T) {
	db := storetest.Open(t)
	const max = 1000_000
	var whole []string
	for i := range 3 {
		e, err := quarantine(t, db, junk(string(rune('a'+i)), 250_000), max)
		if err != nil || e.Truncated {
			t.Fatalf("input %d: %+v %v", i, e, err)
		}
		whole = append(whole, e.ID)
	}
	// 750,000 kept; a fourth whole input would pass 900,000.
	e, err := quarantine(t, db, junk("d", 250_000), max)
	if err != nil || !e.Truncated || !strings.Contains(e.Reason, "only the header is kept") {
		t.Fatalf("past nine tenths: %+v %v", e, err)
	}
	_, raw, err := db.FindQuarantine(e.ID)
	if err != nil || !bytes.Equal(raw, []byte("From: spam@junk.test\r\nSubject: buy d\r\n\r\n")) || e.Size != 250_000 {
		t.Fatalf("kept %q of size %d (%v)", raw, e.Size, err)
	}
	// The same input again is the same entry, nothing added.
	before, _ := db.QuarantineBytes()
	again, err := quarantine(t, db, junk("a", 250_000), max)
	if err != nil || again.ID != whole[0] || !again.Duplicate {
		t.Fatalf("identical input: %+v %v, want entry %s", again, err, whole[0])
	}
	if _, total, _ := db.ListQuarantine(store.Page{Page: 1, Limit: 100}); total != 4 {
		t.Errorf("%d entries after a duplicate, want 4", total)
	}
	if after, _ := db.QuarantineBytes(); after != before {
		t.Errorf("quarantine bytes %d -> %d after a duplicate", before, after)
	}
	// Fill it with headers: once even a header does not fit, refused.
	refused := false
	for i := range 100_000 {
		seed := strings.Repeat("h", 2000) + string(rune(0x4e00+i))
		if _, err := quarantine(t, db, junk(seed, 3000), max); errors.Is(err, store.ErrQuarantineFull) {
			refused = true
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if total, _ := db.QuarantineBytes(); !refused || total > max {
		t.Fatalf("refused %v, quarantine at %d bytes, cap %d", refused, total, max)
	}
	// Deleting gives the space back: a whole input fits again.
	for _, id := range whole {
		if err := db.DeleteQuarantine(id); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := quarantine(t, db, junk("e", 250_000), max); err != nil || e.Truncated {
		t.Fatalf("after deletes: %+v %v", e, err)
	}
	// A deleted entry's input is a new entry again.
	if e, err := quarantine(t, db, junk("a", 250_000), max); err != nil || e.Duplicate || e.ID == whole[0] {
		t.Fatalf("input of a deleted entry: %+v %v", e, err)
	}
}

// TestDeleteQuarantineBefore ensures entries received before a time are
// deleted, with their bytes and their place in the count, others kept.
func TestDeleteQuarantineBefore(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	old, _ := quarantine(t, db, junk("old", 1000), 0)
	clock.Advance(48 * time.Hour)
	fresh, _ := quarantine(t, db, junk("fresh", 2000), 0)
	n, err := db.DeleteQuarantineBefore(clock.Now().Add(-24 * time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d, %v; want 1", n, err)
	}
	if _, _, err := db.FindQuarantine(old.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old entry: %v", err)
	}
	if _, _, err := db.FindQuarantine(fresh.ID); err != nil {
		t.Errorf("fresh entry: %v", err)
	}
	if total, _ := db.QuarantineBytes(); total != 2000 {
		t.Errorf("quarantine bytes %d, want 2000", total)
	}
}
