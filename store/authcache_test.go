package store_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestAuthCacheFollowsWrites ensures cached authentications never outlive
// a revocation or a plan change.
func TestAuthCacheFollowsWrites(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	key, secret := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	for i := 0; i < 3; i++ { // fill the cache
		if _, o, err := db.Authenticate(secret); err != nil || o.Plan != store.PlanStarter {
			t.Fatalf("authenticate: %v %v", o, err)
		}
	}
	if _, err := db.SetOrganizationPlan(org.ID, store.PlanBusiness); err != nil {
		t.Fatal(err)
	}
	if _, o, err := db.Authenticate(secret); err != nil || o.Plan != store.PlanBusiness {
		t.Fatalf("plan after change: %v %v", o, err)
	}
	if _, err := db.RevokeAPIKey(key.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Authenticate(secret); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked key authenticated from the cache: %v", err)
	}
}

// TestAuthCacheRevocationUnderLoad ensures that once RevokeAPIKey returns,
// no authentication succeeds, however many run concurrently.
func TestAuthCacheRevocationUnderLoad(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	key, secret := storetest.MustAPIKey(t, db, org.ID, store.ScopeFull)
	var revoked atomic.Bool
	var late atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				wasRevoked := revoked.Load()
				if _, _, err := db.Authenticate(secret); err == nil && wasRevoked {
					late.Add(1)
				}
			}
		}()
	}
	for i := 0; i < 20; i++ { // churn other keys so entries are refilled
		k, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeRead)
		if _, err := db.RevokeAPIKey(k.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.RevokeAPIKey(key.ID); err != nil {
		t.Fatal(err)
	}
	revoked.Store(true)
	for i := 0; i < 20; i++ {
		k, _ := storetest.MustAPIKey(t, db, org.ID, store.ScopeRead)
		db.RevokeAPIKey(k.ID)
	}
	close(stop)
	wg.Wait()
	if n := late.Load(); n > 0 {
		t.Fatalf("%d authentications succeeded after RevokeAPIKey returned", n)
	}
}
