package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestQueueDigestOnce: a digest is queued once per organization,
// recipient (whatever its case) and period; a refused mail writes no
// marker; markers older than the cutoff are pruned, and the digest can
// then be queued again.
func TestQueueDigestOnce(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	mail := func(to string) *store.OutgoingMail {
		return &store.OutgoingMail{OrgID: org.ID, Kind: store.MailKindDigest, To: to, Subject: "digest", Text: "t"}
	}
	st, err := db.QueueDigest("day 2026-11-21", mail("ops@example.net"))
	if err != nil || st == nil || st.Status != store.MailQueued {
		t.Fatalf("first: %+v %v", st, err)
	}
	if st, err := db.QueueDigest("day 2026-11-21", mail("OPS@example.net")); err != nil || st != nil {
		t.Fatalf("again: %+v %v, want nothing queued", st, err)
	}
	if ok, err := db.DigestQueued(org.ID, "ops@example.net", "day 2026-11-21"); err != nil || !ok {
		t.Fatalf("DigestQueued: %v %v", ok, err)
	}
	if st, err := db.QueueDigest("day 2026-11-22", mail("ops@example.net")); err != nil || st == nil {
		t.Fatalf("next day: %+v %v", st, err)
	}
	if _, err := db.QueueDigest("day 2026-11-23", mail("not an address")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad address: %v", err)
	}
	if ok, _ := db.DigestQueued(org.ID, "not an address", "day 2026-11-23"); ok {
		t.Fatal("a refused mail left a marker")
	}
	clock.Advance(48 * time.Hour)
	if n, err := db.PruneDigestMarkers(clock.Now().Add(-24 * time.Hour)); err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	if st, err := db.QueueDigest("day 2026-11-21", mail("ops@example.net")); err != nil || st == nil {
		t.Fatalf("after pruning: %+v %v", st, err)
	}
	if n, err := db.PruneDigestMarkers(clock.Now().Add(-24 * time.Hour)); err != nil || n != 0 {
		t.Fatalf("pruned %d fresh markers, %v", n, err)
	}
}
