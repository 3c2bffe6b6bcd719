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
	out := make([]OrgOverview, 0, len(orgs))
	for _, om := range orgs {
		ov := OrgOverview{Org: om.Org, Role: om.Role}
		domains, _, err := a.db.ListDomains(om.Org.ID, store.Page{Page: 1, Limit: 1 << 20})
		if err != nil {
			return nil, err
		}
		days, err := a.db.DomainDays(om.Org.ID, from, to)
		if err != nil {
			return nil, err
		}
		for _, d := range domains {
			row := DomainOverview{Domain: d}
			for _, ds := range days[d.ID] {
				row.Messages += ds.Messages
				row.Pass += ds.DMARCPass
			}
			row.PassRate = passRate(row.Pass, row.Messages)
			ov.Messages += row.Messages
			ov.Pass += row.Pass
			ov.Domains = append(ov.Domains, row)
		}
		ov.PassRate = passRate(ov.Pass, ov.Messages)
		if ov.OpenAlerts, err = a.db.CountOpenAlerts(om.Org.ID); err != nil {
			return nil, err
		}
		out = append(out, ov)
	}
	return out, nil
}

func passRate(pass, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(pass) / float64(total)
}
