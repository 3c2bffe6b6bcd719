package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestSessionSweepDeletesExpiredSessions ensures a run deletes the
// sessions past their idle timeout and keeps the live ones.
func TestSessionSweepDeletesExpiredSessions(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	key, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	old, _, err := db.CreateSession(key.ID, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(store.SessionIdleTimeout - time.Hour)
	live, _, err := db.CreateSession(key.ID, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour) // old is idle for the whole timeout now
	j := &SessionSweep{Store: db}
	if job := j.Job(); job.Name != "session-sweep" || job.Every != DefaultSessionSweepEvery {
		t.Errorf("job %q every %s", job.Name, job.Every)
	}
	if err := j.Run(t.Context(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.FindSession(old, clock.Now().Add(-time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired session survived the sweep: %v", err)
	}
	if _, _, _, err := db.FindSession(live, clock.Now()); err != nil {
		t.Errorf("the live session is gone: %v", err)
	}
}

// TestKeyUsageWritesBatchedStamps ensures a run writes the last-used
// stamps the application layer batched, and nothing before it.
func TestKeyUsageWritesBatchedStamps(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	key, secret := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	a := app.New(app.Config{Store: db, Now: clock.Now})
	actor, err := a.Authenticate("192.0.2.1", secret)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	a.KeyUsed(actor)
	lastUsed := func() *time.Time {
		t.Helper()
		keys, err := db.ListAPIKeys(org.ID)
		if err != nil || len(keys) != 1 || keys[0].ID != key.ID {
			t.Fatalf("keys %v, %v", keys, err)
		}
		return keys[0].LastUsedAt
	}
	if got := lastUsed(); got != nil {
		t.Fatalf("stamped before the job ran: %v", got)
	}
	j := &KeyUsage{Keys: a}
	if job := j.Job(); job.Name != "flush-key-usage" || job.Every != DefaultKeyUsageEvery {
		t.Errorf("job %q every %s", job.Name, job.Every)
	}
	if err := j.Run(t.Context(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); got == nil || !got.Equal(clock.Now()) {
		t.Errorf("last used %v, want %v", got, clock.Now())
	}
}

// TestAuditRetention ensures a run deletes the audit entries older than
// the retention and keeps the newer ones.
func TestAuditRetention(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	for _, age := range []time.Duration{401 * 24 * time.Hour, 399 * 24 * time.Hour, time.Hour} {
		if err := db.AppendAudit(store.AuditEntry{At: clock.Now().Add(-age), OrgID: org.ID, Actor: "operator", Action: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	j := &AuditRetention{Audit: app.New(app.Config{Store: db, Now: clock.Now}), Retention: DefaultAuditRetention}
	if j.Job().Name != "audit-retention" {
		t.Errorf("job %q", j.Job().Name)
	}
	if err := j.Run(t.Context(), clock.Now()); err != nil {
		t.Fatal(err)
	}
	p, err := db.ListAudit(org.ID, store.AuditFilter{})
	if err != nil || len(p.Entries) != 2 {
		t.Fatalf("left: %d, %v", len(p.Entries), err)
	}
}
