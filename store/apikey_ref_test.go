package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestResolveAPIKey ensures a key is found by id in any case, by the whole
// key and by a unique prefix, and that a shared prefix is refused with a
// message asking for the id.
func TestResolveAPIKey(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	key, secret := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	for _, ref := range []string{key.ID, strings.ToUpper(key.ID), secret, key.Prefix, key.Prefix + "…", " " + key.Prefix + " "} {
		if id, err := db.ResolveAPIKey(ref); err != nil || id != key.ID {
			t.Errorf("ResolveAPIKey(%q) = %q, %v", ref, id, err)
		}
	}
	for ref, kind := range map[string]error{
		"dmk_zzzz": store.ErrNotFound, "bob": store.ErrInvalid, "dmk_" + strings.Repeat("0", 32): store.ErrNotFound, "": store.ErrInvalid,
	} {
		if _, err := db.ResolveAPIKey(ref); !errors.Is(err, kind) {
			t.Errorf("ResolveAPIKey(%q) = %v, want %v", ref, err, kind)
		}
	}
	// Make two keys share a prefix (4 hex digits: about 300 keys on average).
	seen := map[string]string{}
	for i := 0; i < 20000; i++ {
		k, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeRead)
		if _, err := db.RevokeAPIKey(k.ID); err != nil { // stay under the active key limit
			t.Fatal(err)
		}
		if _, dup := seen[k.Prefix]; dup {
			_, err := db.ResolveAPIKey(k.Prefix)
			if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "give the key id") {
				t.Errorf("shared prefix %s: %v", k.Prefix, err)
			}
			return
		}
		seen[k.Prefix] = k.ID
	}
	t.Fatal("no two of 20000 keys shared a prefix")
}
