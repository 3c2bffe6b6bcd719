package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func sessionFixture(t *testing.T) (*store.DB, *storetest.Clock, *store.APIKey) {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := db.CreateAPIKey(org.ID, "k", store.ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	return db, clock, key
}

// TestSessionLifetimes ensures a session lives while used, ends after 12
// hours idle, and ends 7 days after sign-in however busy.
func TestSessionLifetimes(t *testing.T) {
	db, clock, key := sessionFixture(t)
	token, s, err := db.CreateSession(key.ID, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(token) != 43 || len(s.CSRFToken) != 64 || s.OrgID != key.OrgID {
		t.Fatalf("token %q, session %+v", token, s)
	}
	got, k, org, err := db.FindSession(token, clock.Now())
	if err != nil || k.ID != key.ID || org.ID != key.OrgID || got.CSRFToken != s.CSRFToken {
		t.Fatalf("FindSession: %v %+v", err, got)
	}
	// Used every 11 hours: alive until the 7-day bound.
	now := clock.Now()
	for now.Add(11 * time.Hour).Before(s.CreatedAt.Add(store.SessionMaxAge)) {
		now = now.Add(11 * time.Hour)
		if _, _, _, err := db.FindSession(token, now); err != nil {
			t.Fatalf("at %v: %v", now, err)
		}
	}
	if _, _, _, err := db.FindSession(token, s.CreatedAt.Add(store.SessionMaxAge)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after 7 days: %v, want ErrNotFound", err)
	}

	token2, s2, _ := db.CreateSession(key.ID, clock.Now())
	if _, _, _, err := db.FindSession(token2, s2.LastSeenAt.Add(store.SessionIdleTimeout-time.Second)); err != nil {
		t.Fatalf("just before idle timeout: %v", err)
	}
	last := s2.LastSeenAt.Add(store.SessionIdleTimeout - time.Second)
	if _, _, _, err := db.FindSession(token2, last.Add(store.SessionIdleTimeout)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("12 hours idle: %v, want ErrNotFound", err)
	}
	// An expired session is gone for good, even if the clock went back.
	if _, _, _, err := db.FindSession(token2, last); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired session came back: %v", err)
	}
}

// TestSessionRevocationAndSignOut ensures revoking the key ends its
// sessions at once and sign-out ends one.
func TestSessionRevocationAndSignOut(t *testing.T) {
	db, clock, key := sessionFixture(t)
	a, _, _ := db.CreateSession(key.ID, clock.Now())
	b, _, _ := db.CreateSession(key.ID, clock.Now())
	if err := db.DeleteSession(a); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.FindSession(a, clock.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("signed-out session: %v", err)
	}
	if _, _, _, err := db.FindSession(b, clock.Now()); err != nil {
		t.Fatalf("other session: %v", err)
	}
	if _, err := db.RevokeAPIKey(key.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.FindSession(b, clock.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session of a revoked key: %v", err)
	}
	if n, _ := db.CountSessions(key.ID); n != 0 {
		t.Errorf("%d sessions left after revocation", n)
	}
	if _, _, err := db.CreateSession(key.ID, clock.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session for a revoked key: %v", err)
	}
	for _, bad := range []string{"", "x", a + "x", string(make([]byte, 43))} {
		if _, _, _, err := db.FindSession(bad, clock.Now()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FindSession(%q): %v", bad, err)
		}
	}
}

// TestRevokeOrgAPIKey ensures another organization's key is not found and
// stays active.
func TestRevokeOrgAPIKey(t *testing.T) {
	db, _, key := sessionFixture(t)
	other, _ := db.CreateOrganization("other", store.PlanStarter)
	if _, err := db.RevokeOrgAPIKey(other.ID, key.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	if k := storetest.APIKey(t, db, key.OrgID, key.ID); !k.Active() {
		t.Error("key revoked by another organization")
	}
	if k, err := db.RevokeOrgAPIKey(key.OrgID, key.ID); err != nil || k.Active() {
		t.Errorf("own org: %v", err)
	}
}
