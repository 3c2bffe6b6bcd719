package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestCreateAPIKey ensures a key is created with its secret shown once and only hash and prefix kept.
func TestCreateAPIKey(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	t.Run("OK", func(t *testing.T) {
		key, secret, err := db.CreateAPIKey(org.ID, " ci ", store.ScopeRead)
		wantKind(t, err, nil)
		if !store.ValidKeyFormat(secret) {
			t.Errorf("secret %q has not the key format", secret)
		}
		if key.Prefix != secret[:8] || !strings.HasPrefix(key.Prefix, "dmk_") {
			t.Errorf("Prefix = %q, secret starts %q", key.Prefix, secret[:8])
		}
		if !store.ValidID(key.ID) || key.OrgID != org.ID || key.Name != "ci" || key.Scope != store.ScopeRead ||
			!key.CreatedAt.Equal(storetest.Epoch()) || key.LastUsedAt != nil || !key.Active() {
			t.Errorf("key = %+v", key)
		}
		raw, err := json.Marshal(key)
		wantKind(t, err, nil)
		if strings.Contains(string(raw), secret[8:]) || strings.Contains(string(raw), "sha256") ||
			!strings.Contains(string(raw), `"revoked_at":null`) {
			t.Errorf("JSON = %s", raw)
		}
		assertFileLacks(t, db, secret)
	})
	t.Run("ScopeNormalized", func(t *testing.T) {
		key, _, err := db.CreateAPIKey(org.ID, "n", "FULL")
		wantKind(t, err, nil)
		if key.Scope != store.ScopeFull {
			t.Errorf("Scope = %q", key.Scope)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, _, err := db.CreateAPIKey(store.NewID(), "x", store.ScopeFull)
		wantKind(t, err, store.ErrNotFound)
	})
	for _, tc := range []struct {
		name, keyName string
		scope         store.Scope
	}{
		{"ErrInvalidEmptyName", "  ", store.ScopeFull},
		{"ErrInvalidLongName", strings.Repeat("k", store.MaxKeyNameLen+1), store.ScopeFull},
		{"ErrInvalidControlName", "a\tb", store.ScopeFull},
		{"ErrInvalidScope", "x", "write"},
		{"ErrInvalidEmptyScope", "x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := db.CreateAPIKey(org.ID, tc.keyName, tc.scope)
			wantKind(t, err, store.ErrInvalid)
		})
	}
}

// assertFileLacks fails when the database file holds s in clear.
func assertFileLacks(tb testing.TB, db *store.DB, s string) {
	tb.Helper()
	var buf strings.Builder
	if _, err := db.Backup(&buf); err != nil {
		tb.Fatal(err)
	}
	if strings.Contains(buf.String(), s) {
		tb.Errorf("database file contains %q in clear", s)
	}
}

// TestAPIKeyLimit ensures an organization holds at most 5 active keys and revoking one frees a slot.
func TestAPIKeyLimit(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	other := storetest.MustOrganization(t, db, "other", store.PlanUnlimited)
	var keys []*store.APIKey
	for range store.MaxActiveKeys {
		key, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
		keys = append(keys, key)
	}
	t.Run("ErrLimit", func(t *testing.T) {
		_, _, err := db.CreateAPIKey(org.ID, "sixth", store.ScopeFull)
		wantKind(t, err, store.ErrLimit)
	})
	t.Run("OtherOrganization", func(t *testing.T) {
		storetest.MustAPIKey(t, db, other.ID, store.ScopeFull)
	})
	t.Run("OKAfterRevoke", func(t *testing.T) {
		if _, err := db.RevokeAPIKey(keys[2].ID); err != nil {
			t.Fatal(err)
		}
		storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
		_, _, err := db.CreateAPIKey(org.ID, "seventh", store.ScopeFull)
		wantKind(t, err, store.ErrLimit)
	})
}

// TestListAPIKeys ensures keys come back in creation order, revoked ones included, per organization.
func TestListAPIKeys(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	other := storetest.MustOrganization(t, db, "other", store.PlanStarter)
	var want []string
	for i := range 4 {
		if i == 2 {
			clock.Advance(time.Hour)
		}
		key, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
		want = append(want, key.ID)
		storetest.MustAPIKey(t, db, other.ID, store.ScopeFull)
	}
	if _, err := db.RevokeAPIKey(want[1]); err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		keys, err := db.ListAPIKeys(org.ID)
		wantKind(t, err, nil)
		var got []string
		for _, k := range keys {
			got = append(got, k.ID)
			if k.OrgID != org.ID {
				t.Errorf("key %s of organization %s listed", k.ID, k.OrgID)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("ids = %v, want %v", got, want)
		}
		if keys[1].Active() || keys[1].RevokedAt == nil {
			t.Errorf("revoked key listed as %+v", keys[1])
		}
	})
	t.Run("Empty", func(t *testing.T) {
		empty := storetest.MustOrganization(t, db, "empty", store.PlanStarter)
		keys, err := db.ListAPIKeys(empty.ID)
		wantKind(t, err, nil)
		if keys == nil || len(keys) != 0 {
			t.Errorf("keys = %#v, want empty non-nil", keys)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := db.ListAPIKeys(store.NewID())
		wantKind(t, err, store.ErrNotFound)
	})
}

// TestRevokeAPIKey ensures revocation stamps the time once and is idempotent.
func TestRevokeAPIKey(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	key, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	clock.Advance(time.Minute)
	t.Run("OK", func(t *testing.T) {
		got, err := db.RevokeAPIKey(key.ID)
		wantKind(t, err, nil)
		if got.Active() || !got.RevokedAt.Equal(storetest.Epoch().Add(time.Minute)) {
			t.Errorf("got %+v", got)
		}
	})
	t.Run("OKAgainUnchanged", func(t *testing.T) {
		clock.Advance(time.Hour)
		got, err := db.RevokeAPIKey(key.ID)
		wantKind(t, err, nil)
		if got.RevokedAt == nil || !got.RevokedAt.Equal(storetest.Epoch().Add(time.Minute)) {
			t.Errorf("RevokedAt = %v, want the first revocation time", got.RevokedAt)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := db.RevokeAPIKey(store.NewID())
		wantKind(t, err, store.ErrNotFound)
	})
}

// TestAuthenticate ensures a valid key authenticates and malformed, unknown or revoked keys get one message.
func TestAuthenticate(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanBusiness)
	key, secret := storetest.MustAPIKey(t, db, org.ID, store.ScopeRead)
	revoked, revokedSecret := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	if _, err := db.RevokeAPIKey(revoked.ID); err != nil {
		t.Fatal(err)
	}
	t.Run("OK", func(t *testing.T) {
		gotKey, gotOrg, err := db.Authenticate(secret)
		wantKind(t, err, nil)
		if gotKey.ID != key.ID || gotKey.Scope != store.ScopeRead || *gotOrg != *org {
			t.Errorf("got %+v, %+v", gotKey, gotOrg)
		}
	})
	for _, tc := range []struct{ name, secret string }{
		{"ErrNotFoundEmpty", ""},
		{"ErrNotFoundMalformed", "dmk_xyz"},
		{"ErrNotFoundUppercase", strings.ToUpper(secret)},
		{"ErrNotFoundTrailingSpace", secret + " "},
		{"ErrNotFoundUnknown", "dmk_" + strings.Repeat("0", 32)},
		{"ErrNotFoundOneDigitOff", secret[:35] + flipHex(secret[35])},
		{"ErrNotFoundRevoked", revokedSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, o, err := db.Authenticate(tc.secret)
			wantKind(t, err, store.ErrNotFound)
			if err.Error() != "invalid API key" || k != nil || o != nil {
				t.Errorf("got %v, %v, %q; want nil, nil, \"invalid API key\"", k, o, err)
			}
		})
	}
}

func flipHex(c byte) string {
	if c == '0' {
		return "1"
	}
	return "0"
}

// TestTouchAPIKeys ensures last-use times only move forward and unknown ids are ignored.
func TestTouchAPIKeys(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	a, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	b, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	t0 := storetest.Epoch().Add(time.Hour)
	lastUsed := func(id string) *time.Time {
		k := storetest.APIKey(t, db, org.ID, id)
		if k == nil {
			t.Fatalf("no key %s", id)
		}
		return k.LastUsedAt
	}
	t.Run("OKEmpty", func(t *testing.T) {
		wantKind(t, db.TouchAPIKeys(nil), nil)
	})
	t.Run("OK", func(t *testing.T) {
		err := db.TouchAPIKeys(map[string]time.Time{
			a.ID: t0.Add(700 * time.Millisecond), store.NewID(): t0, "junk": t0,
		})
		wantKind(t, err, nil)
		if got := lastUsed(a.ID); got == nil || !got.Equal(t0) {
			t.Errorf("LastUsedAt = %v, want %v", got, t0)
		}
		if got := lastUsed(b.ID); got != nil {
			t.Errorf("untouched key LastUsedAt = %v", got)
		}
	})
	t.Run("OKEarlierIgnored", func(t *testing.T) {
		err := db.TouchAPIKeys(map[string]time.Time{a.ID: t0.Add(-time.Minute), b.ID: t0.Add(time.Minute)})
		wantKind(t, err, nil)
		if got := lastUsed(a.ID); !got.Equal(t0) {
			t.Errorf("LastUsedAt moved back to %v", got)
		}
		if got := lastUsed(b.ID); got == nil || !got.Equal(t0.Add(time.Minute)) {
			t.Errorf("LastUsedAt = %v, want %v", got, t0.Add(time.Minute))
		}
	})
	t.Run("OKLater", func(t *testing.T) {
		wantKind(t, db.TouchAPIKeys(map[string]time.Time{a.ID: t0.Add(time.Hour)}), nil)
		if got := lastUsed(a.ID); !got.Equal(t0.Add(time.Hour)) {
			t.Errorf("LastUsedAt = %v, want %v", got, t0.Add(time.Hour))
		}
	})
}

// BenchmarkAuthenticate measures the per-request key check.
func BenchmarkAuthenticate(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	_, secret := storetest.MustAPIKey(b, db, org.ID, store.ScopeFull)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := db.Authenticate(secret); err != nil {
			b.Fatal(err)
		}
	}
}
