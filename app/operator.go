package app

import (
	"github.com/dmarcd/dmarcd/store"
)

// The operator view (/orgs): every organization of the actor at a glance,
// from the day-total roll-ups and the alert index alone.

// OperatorDays is how many days of reports the operator view sums.
const OperatorDays = 30

// DomainOverview is one domain in the operator view.
type DomainOverview struct {
	// Domain carries the id, name, status, verification and last report
	// only (store.OrganizationsTotals).
	Domain         *store.Domain
	Messages, Pass int64
	// PassRate is Pass/Messages (0 without messages), as the overview
	// computes it; the pages round it when they render it.
	PassRate float64
}

// OrgOverview is one organization in the operator view.
type OrgOverview struct {
	Org            *store.Organization
	Role           Role
	Domains        []DomainOverview
	Messages, Pass int64
	PassRate       float64
	OpenAlerts     int
}

// OperatorView returns the organizations of Organizations(actor) with
// their domains, DMARC pass rate over the last OperatorDays UTC days and
// open alerts.
func (a *App) OperatorView(actor Actor) ([]OrgOverview, error) {
	orgs, err := a.Organizations(actor)
	if err != nil {
		return nil, err
	}
	to := a.clock().UTC()
	from := to.AddDate(0, 0, -(OperatorDays - 1))
	ids := make([]string, len(orgs))
	for i, om := range orgs {
		ids[i] = om.Org.ID
	}
	totals, err := a.db.OrganizationsTotals(ids, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]OrgOverview, len(orgs))
	for i, om := range orgs {
		ov := OrgOverview{Org: om.Org, Role: om.Role, OpenAlerts: totals[i].OpenAlerts,
			Domains: make([]DomainOverview, len(totals[i].Domains))}
		for j, d := range totals[i].Domains {
			ov.Domains[j] = DomainOverview{Domain: d.Domain, Messages: d.Messages, Pass: d.Pass, PassRate: passRate(d.Pass, d.Messages)}
			ov.Messages += d.Messages
			ov.Pass += d.Pass
		}
		ov.PassRate = passRate(ov.Pass, ov.Messages)
		out[i] = ov
	}
	return out, nil
}

func passRate(pass, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(pass) / float64(total)
}
