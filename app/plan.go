package app

import (
	"context"
	"fmt"

	"github.com/dmarcd/dmarcd/store"
)

// What a plan allows is store.Plan's Limits; what follows from it is
// here. The counts a plan allows (domains, webhooks) are checked by the
// store inside the transaction that creates one, so that two requests at
// once cannot both take the last place; the features are checked by
// Authorize, through the Action of each operation.

// DefaultPlan is the plan of an organization created without one (the
// CLI's default, the first organization of an empty database).
const DefaultPlan = store.PlanUnlimited

// Feature is a part of dmarcd that a plan may or may not include.
type Feature int

// The features a plan may lack.
const (
	noFeature Feature = iota
	// FailureReports are failure (forensic) reports.
	FailureReports
	// Webhooks are webhooks (advanced alerting).
	Webhooks
)

// planMessages are the refusals of a feature the plan lacks, in the
// API's words ("forensic" is the API's name for failure reports).
var planMessages = map[Feature]string{
	FailureReports: "your plan does not include forensic reports",
	Webhooks:       "your plan does not include webhooks (advanced alerting); upgrade to business or unlimited",
}

// includes reports whether plan p includes feature f.
func includes(p store.Plan, f Feature) bool {
	l := p.Limits()
	switch f {
	case FailureReports:
		return l.FailureReports
	case Webhooks:
		return l.Webhooks
	}
	return true
}

// requireFeature is nil when the actor's plan includes f, else a
// PlanFeature *Error.
func requireFeature(actor Actor, f Feature) error {
	if f == noFeature || actor.operator || (actor.org != nil && includes(actor.org.Plan, f)) {
		return nil
	}
	return &Error{Kind: PlanFeature, Feature: f, Msg: planMessages[f]}
}

// Includes reports whether the actor's plan includes f, for a front end
// that shows or hides the feature; the operations check it themselves.
func Includes(actor Actor, f Feature) bool { return requireFeature(actor, f) == nil }

// Settings is what an organization's settings show: its plan's limits
// and what it uses of them.
type Settings struct {
	Limits   store.PlanLimits
	Domains  int // domains registered
	Keys     int // active API keys
	Webhooks int // webhooks
	MaxKeys  int // active keys allowed (every plan)
}

// Settings returns the actor's organization's settings.
func (a *App) Settings(_ context.Context, actor Actor) (*Settings, error) {
	if err := Authorize(actor, Read); err != nil {
		return nil, err
	}
	org := actor.orgID()
	s := &Settings{Limits: actor.org.Plan.Limits(), MaxKeys: store.MaxActiveKeys}
	var err error
	if _, s.Domains, err = a.db.ListDomains(org, store.Page{Page: 1, Limit: 1}); err != nil {
		return nil, err
	}
	keys, err := a.db.ListAPIKeys(org)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.Active() {
			s.Keys++
		}
	}
	if _, s.Webhooks, err = a.db.ListWebhooks(org, store.Page{Page: 1, Limit: 1}); err != nil {
		return nil, err
	}
	return s, nil
}

// PlanSummary says in a few words what plan p allows.
func PlanSummary(p store.Plan) string {
	l := p.Limits()
	domains := fmt.Sprintf("%d domains", l.MaxDomains)
	if l.MaxDomains < 0 {
		domains = "no domain limit"
	}
	failures := "no failure reports"
	if l.FailureReports {
		failures = "failure reports"
	}
	return fmt.Sprintf("%s, %s, up to %d webhooks", domains, failures, l.MaxWebhooks)
}
