package store

import "strings"

// Plan is an organization's plan; it sets what the organization may create.
type Plan string

// The built-in plans.
const (
	PlanStarter   Plan = "starter"
	PlanBusiness  Plan = "business"
	PlanUnlimited Plan = "unlimited"
)

// PlanLimits are what a plan allows.
type PlanLimits struct {
	// MaxDomains is the number of domains allowed; -1 means no limit.
	MaxDomains int
	// FailureReports reports whether failure (forensic) reports are
	// available.
	FailureReports bool
	// Webhooks reports whether webhooks (advanced alerting) are available.
	Webhooks bool
	// MaxWebhooks is the number of webhooks allowed.
	MaxWebhooks int
}

// ParsePlan returns the plan named s (case-insensitive, surrounding space
// ignored). An unknown name is an ErrInvalid *Error listing the valid plans.
func ParsePlan(s string) (Plan, error) {
	switch p := Plan(strings.ToLower(strings.TrimSpace(s))); p {
	case PlanStarter, PlanBusiness, PlanUnlimited:
		return p, nil
	}
	return "", errorf(ErrInvalid, "invalid plan %q: valid plans are starter, business, unlimited", s)
}

// Limits returns what p allows; an unknown plan allows nothing.
func (p Plan) Limits() PlanLimits {
	switch p {
	case PlanStarter:
		return PlanLimits{MaxDomains: 3}
	case PlanBusiness:
		return PlanLimits{MaxDomains: 50, FailureReports: true, Webhooks: true, MaxWebhooks: 10}
	case PlanUnlimited:
		return PlanLimits{MaxDomains: -1, FailureReports: true, Webhooks: true, MaxWebhooks: 25}
	}
	return PlanLimits{}
}
