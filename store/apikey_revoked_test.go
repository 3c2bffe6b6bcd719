package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestRevokedAPIKey ensures RevokedAPIKey finds a revoked key by its
// secret, and nothing for an active, unknown or malformed one.
func TestRevokedAPIKey(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	k, secret, err := db.CreateAPIKey(org.ID, "ci", store.ScopeFull)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secret, "dmk_" + strings.Repeat("0", 32), "nope", ""} {
		if _, err := db.RevokedAPIKey(s); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RevokedAPIKey(%q) before revocation: %v", s, err)
		}
	}
	if _, err := db.RevokeAPIKey(k.ID); err != nil {
		t.Fatal(err)
	}
	got, err := db.RevokedAPIKey(secret)
	if err != nil || got.ID != k.ID || got.RevokedAt == nil {
		t.Errorf("RevokedAPIKey after revocation: %+v, %v", got, err)
	}
}
