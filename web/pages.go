package web

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

const day = 24 * time.Hour

// statsDays is the window of the overview and domain pages.
const statsDays = 30

func (h *Handler) routes() {
	h.router.GET("/static/*path", h.serveAsset)
	h.router.GET("/login", h.getLogin)
	h.router.POST("/login", h.postLogin)
	h.handle("POST", "/logout", app.Read, h.logout)

	h.handle("GET", "/", app.Read, h.overview)
	h.handle("POST", "/domains", app.Write, h.createDomain)
	// /domains/new shares the segment with :id (httprouter allows one).
	h.handle("GET", "/domains/:id", app.Read, h.domainOrNew)
	h.handle("POST", "/domains/:id/verify", app.Write, h.verifyDomain)
	h.handle("GET", "/domains/:id/delete", app.Read, h.confirmDelete)
	h.handle("GET", "/domains/:id/sources", app.Read, h.sources)
	h.handle("GET", "/tls-reports", app.Read, h.tlsReports)
	h.handle("GET", "/tls-reports/:id", app.Read, h.tlsReport)
	h.handle("POST", "/domains/:id/delete", app.Write, h.deleteDomain)

	h.handle("GET", "/reports", app.Read, h.reports)
	h.handle("GET", "/reports/:id", app.Read, h.report)

	h.handle("GET", "/alerts", app.Read, h.alerts)
	h.handle("POST", "/alerts/:id/dismiss", app.Write, h.dismissAlert)
	h.handle("POST", "/alerts", app.Write, h.dismissAlerts)

	h.handle("GET", "/settings", app.Read, h.settings)
	h.handle("GET", "/settings/keys", app.Read, h.keys)
	h.handle("POST", "/settings/keys", app.Write, h.createKey)
	h.handle("POST", "/settings/keys/:id/revoke", app.Write, h.revokeKey)

	h.webhookRoutes()
	h.mailboxRoutes()
	h.notificationRoutes()
	h.quarantineRoutes()

	h.router.NotFound = http.HandlerFunc(h.notFound)
	h.router.MethodNotAllowed = http.HandlerFunc(h.notFound)
	h.router.HandleMethodNotAllowed = false
}

// window is the last statsDays UTC days, today included.
func (h *Handler) window() (from, to time.Time) {
	to = h.now()
	return to.Truncate(day).Add(-(statsDays - 1) * day), to
}

// allDomains is every domain of the organization, newest first.
func (h *Handler) allDomains(orgID string) ([]*store.Domain, error) {
	ds, _, err := h.db.ListDomains(orgID, store.Page{Page: 1, Limit: 1 << 20})
	return ds, err
}

// openAlerts is the organization's undismissed alerts (pending and sent).
func (h *Handler) openAlerts(orgID, domainID string, limit int) ([]*store.Alert, int, error) {
	var all []*store.Alert
	total := 0
	for _, st := range []string{store.AlertPending, store.AlertSent} {
		as, n, err := h.db.ListAlerts(orgID, store.AlertFilter{Status: st, DomainID: domainID, Page: store.Page{Page: 1, Limit: limit}})
		if err != nil {
			return nil, 0, err
		}
		all, total = append(all, as...), total+n
	}
	slices.SortFunc(all, func(a, b *store.Alert) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return all, total, nil
}

type domainRow struct {
	*store.Domain
	Messages, Pass, Fail int64
	PassRate             float64
	Trend                sparkline
	Policy               string
	OpenAlerts           int
	Stage                string // the advice stage, "" when not known yet
}

type overviewPage struct {
	Messages, Pass, Fail int64
	PassRate             float64
	OpenAlerts           int
	Chart                barChart
	Days                 []store.DayStats
	Domains              []domainRow
	Total                int
	Query, Sort          string
	ReportingDomain      string
	Pager                pager
}

// overviewRows is how many domains one overview page lists: a page stays
// light with 1,000 domains.
const overviewRows = 50

func (h *Handler) overview(w http.ResponseWriter, r *req) error {
	from, to := h.window()
	domains, err := h.allDomains(r.orgID())
	if err != nil {
		return err
	}
	days, err := h.db.DomainDays(r.orgID(), from, to)
	if err != nil {
		return err
	}
	alerts, openN, err := h.openAlerts(r.orgID(), "", 1000)
	if err != nil {
		return err
	}
	perDomain := map[string]int{}
	for _, a := range alerts {
		if a.DomainID != nil {
			perDomain[*a.DomainID]++
		}
	}
	p := overviewPage{OpenAlerts: openN, Total: len(domains), ReportingDomain: h.app.ReportingDomain(),
		Query: strings.TrimSpace(r.URL.Query().Get("q")), Sort: r.URL.Query().Get("sort")}
	sum := make([]store.DayStats, statsDays)
	for _, d := range domains {
		row := domainRow{Domain: d, OpenAlerts: perDomain[d.ID], Policy: policyOf(d.LastDNSRecord)}
		for i, ds := range days[d.ID] {
			row.Messages += ds.Messages
			row.Pass += ds.DMARCPass
			row.Fail += ds.DMARCFail
			if i < len(sum) {
				sum[i].Date = ds.Date
				sum[i].Messages += ds.Messages
				sum[i].DMARCPass += ds.DMARCPass
				sum[i].DMARCFail += ds.DMARCFail
			}
		}
		row.PassRate = rate(row.Pass, row.Messages)
		p.Messages += row.Messages
		p.Pass += row.Pass
		p.Fail += row.Fail
		if p.Query == "" || strings.Contains(d.Name, strings.ToLower(p.Query)) {
			p.Domains = append(p.Domains, row)
		}
	}
	p.PassRate = rate(p.Pass, p.Messages)
	p.Chart, p.Days = dailyChart(sum), sum
	sortRows(p.Domains, p.Sort)
	page := pageNum(r)
	p.Pager = newPager(r, page, len(p.Domains), overviewRows)
	if sortedBy(p.Sort) {
		p.Pager = p.Pager.ranked()
	}
	lo := min((page-1)*overviewRows, len(p.Domains))
	p.Domains = p.Domains[lo:min(lo+overviewRows, len(p.Domains))]
	for i := range p.Domains { // only the rows shown
		p.Domains[i].Trend = trend(days[p.Domains[i].ID])
	}
	h.fillStages(r.Context(), r.orgID(), p.Domains)
	h.render(w, r, http.StatusOK, "overview", "Overview", p)
	return nil
}

func sortRows(rows []domainRow, by string) {
	switch by {
	case "name":
		slices.SortStableFunc(rows, func(a, b domainRow) int { return cmp.Compare(a.Name, b.Name) })
	case "messages":
		slices.SortStableFunc(rows, func(a, b domainRow) int { return cmp.Compare(b.Messages, a.Messages) })
	case "pass":
		slices.SortStableFunc(rows, func(a, b domainRow) int { return cmp.Compare(a.PassRate, b.PassRate) })
	case "alerts":
		slices.SortStableFunc(rows, func(a, b domainRow) int { return cmp.Compare(b.OpenAlerts, a.OpenAlerts) })
	}
}

func rate(pass, total int64) float64 {
	if total == 0 {
		return 0
	}
	return float64(pass) / float64(total)
}

// policyOf is the p= tag of a DMARC record, "" without one.
func policyOf(record string) string {
	for _, t := range recordTags(record) {
		if t.Name == "p" {
			return t.Value
		}
	}
	return ""
}

type recordTag struct{ Name, Value, Meaning string }

var tagMeaning = map[string]string{
	"v": "version", "p": "policy for the domain", "sp": "policy for subdomains", "np": "policy for non-existent subdomains",
	"pct": "share of failing mail the policy applies to", "rua": "where aggregate reports go", "ruf": "where failure reports go",
	"adkim": "DKIM alignment (r relaxed, s strict)", "aspf": "SPF alignment (r relaxed, s strict)",
	"fo": "when failure reports are sent", "t": "testing mode (y: policy not fully enforced)", "ri": "report interval in seconds",
	"psd": "public suffix domain",
}

// recordTags splits a DMARC record into its tags, for display.
func recordTags(record string) []recordTag {
	var tags []recordTag
	for part := range strings.SplitSeq(record, ";") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		name = strings.ToLower(strings.TrimSpace(name))
		tags = append(tags, recordTag{Name: name, Value: strings.TrimSpace(value), Meaning: tagMeaning[name]})
	}
	return tags
}

type domainPage struct {
	Domain          *store.Domain
	Records         []dnscheck.DNSRecord
	VerifyError     string
	Verified        bool
	Published       []recordTag
	Check           published
	Stats           *store.DomainStats
	Chart           barChart
	Disposition     shareBar
	DispositionDays stackChart
	DispDays        []store.DispositionDay
	Senders         *sendersCard
	TLS             *tlsSection
	Reports         []*store.Report
	Reporters       []reporter
	Alerts          []*store.Alert
	OpenAlerts      int
	ReportingDomain string
}

// domainAlerts is how many open alerts a domain page lists.
const domainAlerts = 5

type reporter struct {
	Name     string
	Reports  int
	Messages int64
}

func (h *Handler) domainOrNew(w http.ResponseWriter, r *req) error {
	if r.params.ByName("id") == "new" {
		h.render(w, r, http.StatusOK, "domain_new", "Add a domain", newDomainPage{})
		return nil
	}
	return h.domain(w, r, http.StatusOK, "")
}

// domain renders a domain's page; verifyErr is the reason a Verify just
// failed, shown with status 422.
func (h *Handler) domain(w http.ResponseWriter, r *req, status int, verifyErr string) error {
	d, err := h.db.FindDomain(r.orgID(), strings.ToLower(r.params.ByName("id")))
	if err != nil {
		return err
	}
	from, to := h.window()
	st, err := h.db.DomainStatistics(r.orgID(), d.ID, from, to)
	if err != nil {
		return err
	}
	reports, _, err := h.db.ListReports(r.orgID(), store.ReportFilter{DomainID: d.ID, Page: store.Page{Page: 1, Limit: 200}})
	if err != nil {
		return err
	}
	alerts, openN, err := h.openAlerts(r.orgID(), d.ID, domainAlerts)
	if err != nil {
		return err
	}
	dispDays, err := h.db.DomainDispositionDays(r.orgID(), d.ID, from, to)
	if err != nil {
		return err
	}
	snd, err := h.domainSenders(r.Context(), d, from, to, r.URL.Query().Get("senders") == "failing")
	if err != nil {
		return err
	}
	tls, err := h.domainTLS(d, from, to)
	if err != nil {
		return err
	}
	p := domainPage{DispositionDays: dispositionChart(dispDays), DispDays: dispDays, Senders: snd, TLS: tls, Domain: d, Stats: st, Chart: dailyChart(st.ByDay), Alerts: alerts[:min(len(alerts), domainAlerts)],
		OpenAlerts: openN, VerifyError: verifyErr,
		Verified: r.URL.Query().Get("verified") == "1", ReportingDomain: h.app.ReportingDomain(),
		Published: recordTags(d.LastDNSRecord),
		Records:   h.app.DomainRecords(d)}
	p.Disposition = shares(sharePart{Label: "none", Class: "none", N: st.Disposition.None},
		sharePart{Label: "quarantine", Class: "quarantine", N: st.Disposition.Quarantine},
		sharePart{Label: "reject", Class: "reject", N: st.Disposition.Reject})
	byName := map[string]*reporter{}
	for _, rep := range reports {
		x := byName[rep.OrgName]
		if x == nil {
			x = &reporter{Name: rep.OrgName}
			byName[rep.OrgName] = x
			p.Reporters = append(p.Reporters, reporter{})
		}
		x.Reports++
		x.Messages += rep.MessageCount
	}
	p.Reporters = p.Reporters[:0]
	for _, x := range byName {
		p.Reporters = append(p.Reporters, *x)
	}
	slices.SortFunc(p.Reporters, func(a, b reporter) int {
		return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Name, b.Name))
	})
	p.Reports = reports[:min(len(reports), 10)]
	p.Check.Check, p.Check.Failed = h.liveCheck(r.Context(), d.Name)
	if p.Check.Check == nil {
		p.Check.Fallback = p.Published
	}
	h.render(w, r, status, "domain", d.Name, p)
	return nil
}

type newDomainPage struct {
	Name, Error string
}

func (h *Handler) createDomain(w http.ResponseWriter, r *req) error {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	fail := func(msg string) error {
		h.render(w, r, http.StatusUnprocessableEntity, "domain_new", "Add a domain", newDomainPage{Name: name, Error: msg})
		return nil
	}
	if name == "" {
		return fail("Enter the domain name, e.g. example.com.")
	}
	d, _, err := h.app.CreateDomain(r.Context(), r.actor, name)
	if err != nil {
		if _, msg, ferr := formFailure(err); ferr == nil {
			return fail(msg)
		}
		return err
	}
	http.Redirect(w, r.Request, "/domains/"+d.ID, http.StatusSeeOther)
	return nil
}

func (h *Handler) verifyDomain(w http.ResponseWriter, r *req) error {
	d, err := h.db.FindDomain(r.orgID(), strings.ToLower(r.params.ByName("id")))
	if err != nil {
		return err
	}
	h.checks.forget(d.Name)
	h.views.ForgetPublished(d.Name)
	if _, err := h.app.VerifyDomain(r.Context(), r.actor, d.ID); err != nil {
		switch e := app.AsError(err); {
		case e.Kind == app.Unverified:
			return h.domain(w, r, http.StatusUnprocessableEntity, e.Msg)
		case e.Kind == app.DNSUnavailable || errors.Is(err, context.DeadlineExceeded):
			return h.domain(w, r, http.StatusServiceUnavailable, "DNS lookups failed or timed out; try again in a minute.")
		}
		return err
	}
	http.Redirect(w, r.Request, "/domains/"+d.ID+"?verified=1", http.StatusSeeOther)
	return nil
}

func (h *Handler) confirmDelete(w http.ResponseWriter, r *req) error {
	d, err := h.db.FindDomain(r.orgID(), strings.ToLower(r.params.ByName("id")))
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "domain_delete", "Delete "+d.Name, d)
	return nil
}

func (h *Handler) deleteDomain(w http.ResponseWriter, r *req) error {
	if err := h.app.DeleteDomain(r.Context(), r.actor, strings.ToLower(r.params.ByName("id"))); err != nil {
		return err
	}
	http.Redirect(w, r.Request, "/", http.StatusSeeOther)
	return nil
}

var dispositionSeries = []seriesKey{{Class: "none", Label: "none"}, {Class: "quarantine", Label: "quarantine"}, {Class: "reject", Label: "reject"}}

// dispositionChart draws what receivers did with the mail each day.
func dispositionChart(days []store.DispositionDay) stackChart {
	dates := make([]string, len(days))
	values := make([][]int64, len(days))
	for i, d := range days {
		dates[i], values[i] = d.Date, []int64{d.None, d.Quarantine, d.Reject}
	}
	return stackedChart("Messages per day by what receivers did: delivered (none), quarantined, rejected", dispositionSeries, dates, values)
}
