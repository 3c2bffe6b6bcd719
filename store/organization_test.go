package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// wantKind fails the test unless err is of the given kind (nil kind: no error).
func wantKind(tb testing.TB, err, kind error) {
	tb.Helper()
	switch {
	case kind == nil && err != nil:
		tb.Fatalf("unexpected error: %v", err)
	case kind != nil && !errors.Is(err, kind):
		tb.Fatalf("err = %v, want kind %v", err, kind)
	case kind != nil:
		if _, ok := errors.AsType[*store.Error](err); !ok {
			tb.Fatalf("err = %v (%T), want a *store.Error", err, err)
		}
	}
}

// TestCreateOrganization ensures names are trimmed, validated and unique regardless of case.
func TestCreateOrganization(t *testing.T) {
	db := storetest.Open(t)
	t.Run("OK", func(t *testing.T) {
		org, err := db.CreateOrganization("  Acme Corp ", store.PlanBusiness)
		wantKind(t, err, nil)
		if !store.ValidID(org.ID) || org.Name != "Acme Corp" || org.Plan != store.PlanBusiness ||
			!org.CreatedAt.Equal(storetest.Epoch()) {
			t.Errorf("org = %+v", org)
		}
	})
	t.Run("PlanNormalized", func(t *testing.T) {
		org, err := db.CreateOrganization("normalized", "Unlimited")
		wantKind(t, err, nil)
		if org.Plan != store.PlanUnlimited {
			t.Errorf("Plan = %q", org.Plan)
		}
	})
	t.Run("ErrConflict", func(t *testing.T) {
		_, err := db.CreateOrganization("ACME CORP", store.PlanStarter)
		wantKind(t, err, store.ErrConflict)
	})
	for _, tc := range []struct {
		name, org string
		plan      store.Plan
	}{
		{"ErrInvalidEmpty", "   ", store.PlanStarter},
		{"ErrInvalidTooLong", strings.Repeat("x", 65), store.PlanStarter},
		{"ErrInvalidControl", "bad\x00name", store.PlanStarter},
		{"ErrInvalidNewline", "bad\nname", store.PlanStarter},
		{"ErrInvalidUTF8", "bad\xffname", store.PlanStarter},
		{"ErrInvalidLooksLikeID", "0190f5c4-7b1a-7c3d-8e4f-0123456789ab", store.PlanStarter},
		{"ErrInvalidLooksLikeUpperID", "0190F5C4-7B1A-7C3D-8E4F-0123456789AB", store.PlanStarter},
		{"ErrInvalidPlan", "fine", "gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.CreateOrganization(tc.org, tc.plan)
			wantKind(t, err, store.ErrInvalid)
		})
	}
	t.Run("MaxLength", func(t *testing.T) {
		_, err := db.CreateOrganization(strings.Repeat("é", 64), store.PlanStarter)
		wantKind(t, err, nil)
	})
}

// TestFindOrganization ensures lookups by id and by name, and ErrNotFound otherwise.
func TestFindOrganization(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "Acme", store.PlanStarter)
	t.Run("OKByID", func(t *testing.T) {
		got, err := db.FindOrganizationByID(org.ID)
		wantKind(t, err, nil)
		if *got != *org {
			t.Errorf("got %+v, want %+v", got, org)
		}
	})
	for _, ref := range []string{org.ID, strings.ToUpper(org.ID), "Acme", "acme", " ACME "} {
		t.Run("OKByRef", func(t *testing.T) {
			got, err := db.FindOrganization(ref)
			wantKind(t, err, nil)
			if got.ID != org.ID {
				t.Errorf("FindOrganization(%q) = %+v", ref, got)
			}
		})
	}
	for _, ref := range []string{"", "nope", store.NewID(), "not-an-id"} {
		t.Run("ErrNotFound", func(t *testing.T) {
			_, err := db.FindOrganization(ref)
			wantKind(t, err, store.ErrNotFound)
			_, err = db.FindOrganizationByID(ref)
			wantKind(t, err, store.ErrNotFound)
		})
	}
}

// TestListOrganizations ensures the list holds every organization sorted by name, and counts agree.
func TestListOrganizations(t *testing.T) {
	db := storetest.Open(t)
	t.Run("Empty", func(t *testing.T) {
		orgs, err := db.ListOrganizations()
		wantKind(t, err, nil)
		if orgs == nil || len(orgs) != 0 {
			t.Errorf("orgs = %#v, want empty non-nil", orgs)
		}
		if n, err := db.CountOrganizations(); err != nil || n != 0 {
			t.Errorf("CountOrganizations() = %d, %v", n, err)
		}
	})
	for _, name := range []string{"zeta", "Alpha", "mid", "beta"} {
		storetest.MustOrganization(t, db, name, store.PlanStarter)
	}
	t.Run("OK", func(t *testing.T) {
		orgs, err := db.ListOrganizations()
		wantKind(t, err, nil)
		var names []string
		for _, o := range orgs {
			names = append(names, o.Name)
		}
		if got, want := strings.Join(names, ","), "Alpha,beta,mid,zeta"; got != want {
			t.Errorf("names = %s, want %s", got, want)
		}
		if n, err := db.CountOrganizations(); err != nil || n != 4 {
			t.Errorf("CountOrganizations() = %d, %v; want 4", n, err)
		}
	})
}

// TestSetOrganizationPlan ensures the plan changes and persists, with errors for bad plans and ids.
func TestSetOrganizationPlan(t *testing.T) {
	db := storetest.Open(t)
	org := storetest.MustOrganization(t, db, "acme", store.PlanStarter)
	t.Run("OK", func(t *testing.T) {
		got, err := db.SetOrganizationPlan(org.ID, "business")
		wantKind(t, err, nil)
		if got.Plan != store.PlanBusiness || got.Name != "acme" || !got.CreatedAt.Equal(org.CreatedAt) {
			t.Errorf("got %+v", got)
		}
		found, _ := db.FindOrganizationByID(org.ID)
		if found.Plan != store.PlanBusiness {
			t.Errorf("stored plan = %q", found.Plan)
		}
	})
	t.Run("ErrInvalid", func(t *testing.T) {
		_, err := db.SetOrganizationPlan(org.ID, "gold")
		wantKind(t, err, store.ErrInvalid)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := db.SetOrganizationPlan(store.NewID(), store.PlanStarter)
		wantKind(t, err, store.ErrNotFound)
	})
}

// TestErrorMessage ensures a store error shows its message and unwraps to its kind.
func TestErrorMessage(t *testing.T) {
	err := &store.Error{Kind: store.ErrNotFound, Msg: "domain not found"}
	if err.Error() != "domain not found" || !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		t.Errorf("Error %v does not behave", err)
	}
}
