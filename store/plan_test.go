package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// TestParsePlan ensures plan names parse regardless of case and bad names list the valid ones.
func TestParsePlan(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want store.Plan
	}{
		{"starter", store.PlanStarter},
		{"Business", store.PlanBusiness},
		{" unlimited ", store.PlanUnlimited},
	} {
		if got, err := store.ParsePlan(tc.in); err != nil || got != tc.want {
			t.Errorf("ParsePlan(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "free", "enterprise", "start"} {
		_, err := store.ParsePlan(in)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "starter, business, unlimited") {
			t.Errorf("ParsePlan(%q): err = %v, want ErrInvalid listing the plans", in, err)
		}
	}
}

// TestPlanLimits ensures each plan allows what API.md's table says.
func TestPlanLimits(t *testing.T) {
	for _, tc := range []struct {
		plan store.Plan
		want store.PlanLimits
	}{
		{store.PlanStarter, store.PlanLimits{MaxDomains: 3}},
		{store.PlanBusiness, store.PlanLimits{MaxDomains: 50, FailureReports: true, Webhooks: true, MaxWebhooks: 10}},
		{store.PlanUnlimited, store.PlanLimits{MaxDomains: -1, FailureReports: true, Webhooks: true, MaxWebhooks: 25}},
		{"bogus", store.PlanLimits{}},
	} {
		if got := tc.plan.Limits(); got != tc.want {
			t.Errorf("%q.Limits() = %+v, want %+v", tc.plan, got, tc.want)
		}
	}
}

// TestParseScope ensures scope names parse regardless of case and bad names are ErrInvalid.
func TestParseScope(t *testing.T) {
	if got, err := store.ParseScope("READ"); err != nil || got != store.ScopeRead {
		t.Errorf("ParseScope(READ) = %q, %v", got, err)
	}
	if got, err := store.ParseScope("full"); err != nil || got != store.ScopeFull {
		t.Errorf("ParseScope(full) = %q, %v", got, err)
	}
	for _, in := range []string{"", "write", "admin"} {
		if _, err := store.ParseScope(in); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ParseScope(%q): err = %v, want ErrInvalid", in, err)
		}
	}
}
