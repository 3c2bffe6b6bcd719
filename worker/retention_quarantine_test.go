package worker

import (
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestRetentionDeletesOldQuarantine ensures quarantine entries received
// longer ago than QuarantineRetention go, newer ones stay, and a zero
// QuarantineRetention keeps them all.
func TestRetentionDeletesOldQuarantine(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	put := func(name string, at time.Time) string {
		item := &store.QuarantineItem{Entry: store.QuarantineEntry{Source: "import", Name: name, Reason: "junk", Size: 4, ReceivedAt: at},
			Raw: []byte(name)}
		if _, err := db.NewIngester().Commit(&store.IngestBatch{Quarantine: []*store.QuarantineItem{item}}); err != nil {
			t.Fatal(err)
		}
		return item.Entry.ID
	}
	now := clock.Now()
	old := put("old1", now.Add(-31*24*time.Hour))
	fresh := put("new1", now.Add(-29*24*time.Hour))
	if err := (&Retention{Store: db}).Run(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := db.ListQuarantine(store.Page{Page: 1, Limit: 10}); total != 2 {
		t.Fatalf("zero QuarantineRetention deleted entries: %d left", total)
	}
	if err := (&Retention{Store: db, QuarantineRetention: DefaultQuarantineRetention}).Run(t.Context(), now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.FindQuarantine(old); err == nil {
		t.Error("entry of 31 days kept")
	}
	if _, _, err := db.FindQuarantine(fresh); err != nil {
		t.Errorf("entry of 29 days: %v", err)
	}
}
