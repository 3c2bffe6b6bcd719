package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// The senders parts of the web interface (issue 10): the domain page's
// "who sends" table and enforcement card, the sources drill-down, and each
// domain's stage on the overview. All of it comes from senders.Views, the
// code the API's /sources, /senders and /policy-advice run.

// stageLabel is an advice stage as people read it.
func stageLabel(stage string) string { return senders.StageLabel(stage) }

// stageTTL is how long a computed stage is reused while the domain's data
// (its last report, its DMARC record, the UTC day) is unchanged; names
// resolved in between (reverse DNS) can move a sender into a group.
const stageTTL = time.Hour

// stageCache keeps each domain's advice stage so that the overview, which
// lists up to 50 domains a page out of 1,000, does not compute 50 advices
// per view: a stage is computed when a domain page is shown or when the
// overview first lists the domain, and kept while the domain's data is
// unchanged.
type stageCache struct {
	mu sync.Mutex
	m  map[string]stageEntry
}

type stageEntry struct {
	key   string
	stage string
	at    time.Time
}

func newStageCache() *stageCache { return &stageCache{m: map[string]stageEntry{}} }

// stageKey is what a stage depends on besides the reverse DNS cache.
func stageKey(d *store.Domain, now time.Time) string {
	var b strings.Builder
	b.WriteString(now.UTC().Format(time.DateOnly))
	if d.LastReportAt != nil {
		b.WriteString("|" + strconv.FormatInt(d.LastReportAt.UnixNano(), 10))
	}
	b.WriteString("|" + d.LastDNSRecord + "|" + d.DMARCRecord)
	return b.String()
}

func (c *stageCache) get(d *store.Domain, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[d.ID]
	if !ok || e.key != stageKey(d, now) || now.Sub(e.at) >= stageTTL {
		return "", false
	}
	return e.stage, true
}

func (c *stageCache) put(d *store.Domain, now time.Time, stage string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[d.ID] = stageEntry{key: stageKey(d, now), stage: stage, at: now}
}

// overviewStageBudget bounds the time one overview spends computing the
// stages it has not cached; rows past it show none until the next view.
const overviewStageBudget = 2 * time.Second

// fillStages sets the stage of the overview's shown rows: from the cache
// (a stage computed here or on the domain page, fresh for the domain's
// data), else the stage the sender-watch job stored at its last hourly
// evaluation (one read for all rows, so a cold overview computes nothing),
// else computed within the budget for a domain the job has not seen yet.
func (h *Handler) fillStages(ctx context.Context, orgID string, rows []domainRow) {
	now := h.now()
	from, to := h.window()
	ctx, cancel := context.WithTimeout(ctx, overviewStageBudget)
	defer cancel()
	var missing []string
	for i := range rows {
		if st, ok := h.stages.get(rows[i].Domain, now); ok {
			rows[i].Stage = st
		} else {
			missing = append(missing, rows[i].Domain.ID)
		}
	}
	if len(missing) == 0 {
		return
	}
	stored, err := h.db.SenderStages(missing)
	if err != nil {
		stored = nil // computed below instead
	}
	for i := range rows {
		d := rows[i].Domain
		if rows[i].Stage != "" {
			continue
		}
		if st, ok := stored[d.ID]; ok {
			rows[i].Stage = st
			continue
		}
		if ctx.Err() != nil {
			continue
		}
		a, err := h.views.PolicyAdvice(ctx, orgID, d.ID, from, to)
		if err != nil || ctx.Err() != nil {
			continue // not cached: a view cut short may lack SPF authorization
		}
		h.stages.put(d, now, a.Stage)
		rows[i].Stage = a.Stage
	}
}

// topSourceRows is how many sources the domain page lists.
const topSourceRows = 10

// sendersCard is the domain page's "who sends" table and enforcement card.
type sendersCard struct {
	Groups      []*senders.Group // all, or those with failing mail when FailingOnly
	AllGroups   int
	FailingOnly bool
	Sources     []*senders.Source // the top ones
	AllSources  int
	GeoNote     string
	Advice      *senders.Advice // nil when the published record could not be read
	AdviceError string
}

// domainSenders computes the domain page's sender parts and caches the
// stage for the overview; failingOnly keeps the groups with failing mail.
func (h *Handler) domainSenders(ctx context.Context, d *store.Domain, from, to time.Time, failingOnly bool) (*sendersCard, error) {
	dv, err := h.views.Domain(ctx, d.OrgID, d.ID, from, to)
	if err != nil {
		return nil, err
	}
	if ctx.Err() == nil && dv.Advice != nil {
		h.stages.put(d, h.now(), dv.Advice.Stage)
	}
	top := dv.Sources[:min(len(dv.Sources), topSourceRows)]
	c := &sendersCard{Groups: dv.Groups, AllGroups: len(dv.Groups), FailingOnly: failingOnly, Sources: top,
		AllSources: len(dv.Sources), GeoNote: h.sourcesGeoNote(top), Advice: dv.Advice, AdviceError: dv.AdviceError}
	if failingOnly {
		c.Groups = nil
		for _, g := range dv.Groups {
			if g.Status != "passing" {
				c.Groups = append(c.Groups, g)
			}
		}
	}
	return c, nil
}

// geoNote says why geolocation columns are blank: no database configured
// (and the flag that sets one), or no answer for some addresses.
func (h *Handler) geoNote(blankCountry, blankAS bool) string {
	var parts []string
	if blankCountry && !h.cfg.GeoIPCity {
		parts = append(parts, "Country and city are blank: no GeoIP database: see --geoip-city.")
	}
	if blankAS && !h.cfg.GeoIPASN {
		parts = append(parts, "AS is blank: no GeoIP ASN database: see --geoip-asn.")
	}
	if blankCountry && h.cfg.GeoIPCity || blankAS && h.cfg.GeoIPASN {
		parts = append(parts, "A blank country or AS: the GeoIP database has no answer for that address, or the report was stored before the database was set up.")
	}
	return strings.Join(parts, " ")
}

// sourcesGeoNote is geoNote for rows of sources.
func (h *Handler) sourcesGeoNote(rows []*senders.Source) string {
	var cc, as bool
	for _, s := range rows {
		cc = cc || s.CountryCode == nil
		as = as || s.ASN == nil
	}
	return h.geoNote(cc, as)
}

// maxEvidenceLines is how many of a source's DKIM and SPF domains a row
// shows (the most messages first; the API has them all).
const maxEvidenceLines = 4

// evidenceLines are the DKIM and SPF domains of s as a row shows them:
// "DKIM d=sendgrid.net: 25 of 25 verified", "SPF mcsv.net: 0 of 9 passed".
func evidenceLines(s *senders.Source) []string {
	var out []string
	for _, d := range s.DKIMDomains {
		out = append(out, fmt.Sprintf("DKIM d=%s: %s of %s verified", d.Domain, formatNum(d.Pass), formatNum(d.Messages)))
	}
	for _, d := range s.SPFDomains {
		out = append(out, fmt.Sprintf("SPF %s: %s of %s passed", d.Domain, formatNum(d.Pass), formatNum(d.Messages)))
	}
	if len(out) > maxEvidenceLines {
		out = append(out[:maxEvidenceLines-1], fmt.Sprintf("and %d more", len(out)-maxEvidenceLines+1))
	}
	return out
}

// sourcesPage is the sources drill-down of one domain.
type sourcesPage struct {
	Domain           *store.Domain
	Sources          []*senders.Source
	Total            int
	DateFrom, DateTo string
	Group, IP        string // the filters
	GeoNote          string
	Error            string
	Pager            pager
	// Failing lists only the sources with failing mail; Matching is
	// how many of Total have some.
	Failing  bool
	Matching int
}

// maxRangeDays is the longest date range the drill-down serves, as the API.
const maxRangeDays = 366

func (h *Handler) sources(w http.ResponseWriter, r *req) error {
	d, err := h.db.FindDomain(r.orgID(), strings.ToLower(r.params.ByName("id")))
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, to := h.window()
	p := sourcesPage{Domain: d, DateFrom: from.Format(time.DateOnly), DateTo: to.Format(time.DateOnly),
		Group: q.Get("group"), IP: strings.TrimSpace(q.Get("ip")), Failing: q.Get("failing") == "1"}
	f, fv, err1 := dateParam(q, "from")
	t, tv, err2 := dateParam(q, "to")
	if fv != "" {
		p.DateFrom = fv
	}
	if tv != "" {
		p.DateTo = tv
	}
	if f != nil {
		from = *f
	}
	if t != nil {
		to = *t
	}
	switch {
	case errors.Join(err1, err2) != nil:
		p.Error = "Dates are written 2026-11-20."
	case to.Before(from):
		p.Error = "The end date is before the start date."
	case to.Sub(from) >= maxRangeDays*day:
		p.Error = "The range is longer than " + strconv.Itoa(maxRangeDays) + " days."
	}
	if p.IP != "" {
		if a, err := netip.ParseAddr(p.IP); err != nil {
			p.Error = "Not an IP address: " + p.IP
		} else {
			p.IP = a.String()
		}
	}
	if p.Error != "" {
		h.render(w, r, http.StatusBadRequest, "sources", "Sources of "+d.Name, p)
		return nil
	}
	rows, err := h.views.Sources(r.Context(), r.orgID(), d.ID, from, to, p.Group)
	if err != nil {
		return err
	}
	if p.IP != "" {
		var one []*senders.Source
		for _, s := range rows {
			if s.SourceIP == p.IP {
				one = append(one, s)
			}
		}
		rows = one
	}
	p.Total = len(rows)
	if p.Failing {
		rows = failingSources(rows)
	}
	page := pageNum(r)
	p.Matching, p.Pager = len(rows), newPager(r, page, len(rows), listLimit).ranked()
	lo := min((page-1)*listLimit, len(rows))
	p.Sources = rows[lo:min(lo+listLimit, len(rows))]
	p.GeoNote = h.sourcesGeoNote(p.Sources)
	h.render(w, r, http.StatusOK, "sources", "Sources of "+d.Name, p)
	return nil
}

// DMARCChecker is the check-dmarc of package dnscheck: Config.DNS gives the
// domain page the live view of the published record.
type DMARCChecker interface {
	CheckDMARC(ctx context.Context, domain string) (*dnscheck.CheckResult, error)
}

// Lifetimes of a live check kept for the domain page: a page view does not
// query DNS each time, and a failing DNS costs the budget once a minute.
const (
	checkTTL       = 5 * time.Minute
	failedCheckTTL = time.Minute
)

// checkCache keeps the last live check-dmarc of each domain name.
type checkCache struct {
	mu sync.Mutex
	m  map[string]checkEntry
}

type checkEntry struct {
	res *dnscheck.CheckResult // nil: the check failed
	at  time.Time
}

func newCheckCache() *checkCache { return &checkCache{m: map[string]checkEntry{}} }

// published is the domain page's view of the published record: the live
// check when it answered, else the record of the last DNS check.
type published struct {
	Check    *dnscheck.CheckResult // nil: no live answer
	Failed   bool                  // the live check failed (DNS error or budget)
	Fallback []recordTag           // the last DNS check's record
}

// liveCheck runs (or reuses) check-dmarc for name within the budget.
func (h *Handler) liveCheck(ctx context.Context, name string) (*dnscheck.CheckResult, bool) {
	c := h.cfg.DNS
	if c == nil {
		return nil, false
	}
	now := h.cfg.Now()
	h.checks.mu.Lock()
	e, hit := h.checks.m[name]
	h.checks.mu.Unlock()
	// A record found is kept longer than none or a failure: a person
	// publishing one reloads the page to see it.
	if hit && ((e.res != nil && e.res.Found && now.Sub(e.at) < checkTTL) || now.Sub(e.at) < failedCheckTTL) {
		return e.res, e.res == nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.CheckBudget)
	defer cancel()
	res, err := c.CheckDMARC(ctx, name)
	if err != nil {
		res = nil
	}
	h.checks.mu.Lock()
	h.checks.m[name] = checkEntry{res: res, at: now}
	h.checks.mu.Unlock()
	return res, res == nil
}

// forget drops the cached check of name: a Verify just looked at DNS.
func (c *checkCache) forget(name string) {
	c.mu.Lock()
	delete(c.m, name)
	c.mu.Unlock()
}
