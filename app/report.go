package app

import (
	"context"
	"strings"

	"github.com/dmarcd/dmarcd/store"
)

// What is done to reports and alerts, and the reads a plan gates:
// failure (forensic) reports come with some plans only. Errors of the
// reads are the store's, for the front end to name.

// DismissAlert dismisses alert id; dismissing it again is no error.
func (a *App) DismissAlert(_ context.Context, actor Actor, id string) (*store.Alert, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, err
	}
	al, err := a.db.DismissAlert(actor.orgID(), id)
	return al, notFound(err, "alert")
}

// DismissAlerts dismisses the alerts of the actor's organization among
// ids (matched without regard to case and spaces), in a few
// transactions rather than one per alert, and returns how many of ids are
// its alerts, dismissed now or before. Another organization's alert, or
// an id that is none, is skipped, as DismissAlert would find it not
// found.
func (a *App) DismissAlerts(_ context.Context, actor Actor, ids []string) (int, error) {
	if err := Authorize(actor, Write); err != nil {
		return 0, err
	}
	clean := make([]string, len(ids))
	for i, id := range ids {
		clean[i] = strings.ToLower(strings.TrimSpace(id))
	}
	return a.db.DismissAlerts(actor.orgID(), clean)
}

// FailureReports returns one page of the failure reports f selects, and
// the total.
func (a *App) FailureReports(_ context.Context, actor Actor, f store.FailureFilter) ([]*store.FailureReport, int, error) {
	if err := Authorize(actor, ReadFailureReports); err != nil {
		return nil, 0, err
	}
	return a.db.ListFailureReports(actor.orgID(), f)
}

// FailureReportsPage is FailureReports with the cursor of the next page
// (the API's listing).
func (a *App) FailureReportsPage(_ context.Context, actor Actor, f store.FailureFilter) (*store.FailureReportPage, error) {
	if err := Authorize(actor, ReadFailureReports); err != nil {
		return nil, err
	}
	return a.db.ListFailureReportsPage(actor.orgID(), f)
}

// FailureReport returns failure report id with its original headers.
func (a *App) FailureReport(_ context.Context, actor Actor, id string) (*store.FailureReportDetail, error) {
	if err := Authorize(actor, ReadFailureReports); err != nil {
		return nil, err
	}
	return a.db.FindFailureReport(actor.orgID(), id)
}

// FailureSummary returns the failure reports of the last 7 UTC days up to
// now, from the daily counts kept at ingest.
func (a *App) FailureSummary(_ context.Context, actor Actor) (*store.FailureSummary, error) {
	if err := Authorize(actor, ReadFailureReports); err != nil {
		return nil, err
	}
	return a.db.FailureSummary(actor.orgID(), a.now())
}

// FailureStatistics returns all-time statistics of failure reports,
// narrowed by f.
func (a *App) FailureStatistics(_ context.Context, actor Actor, f store.FailureStatsFilter) (*store.FailureStats, error) {
	if err := Authorize(actor, ReadFailureReports); err != nil {
		return nil, err
	}
	return a.db.FailureStatistics(actor.orgID(), f)
}
