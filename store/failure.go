package store

import (
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// Failure (forensic, RUF) reports. Each is one message that failed DMARC,
// as a receiver reported it: stored under its own id with its original
// headers beside it (bucketFailureHeaders, read only by the single GET),
// indexed by organization and by domain in arrival-date order, and counted
// in per-organization, per-day, per-domain roll-ups (failure_stats.go) so
// that the summary and statistics never scan reports. Bodies of original
// messages are never stored: package dmarc does not even keep them.

// Failure reports are package reports' values.
type (
	// FailureAuthResults are a failure report's result per check.
	FailureAuthResults = reports.FailureAuthResults
	// FailureReport is one stored failure report as the list shows it.
	FailureReport = reports.FailureReport
	// FailureHeader is one header field of a reported message.
	FailureHeader = reports.FailureHeader
	// FailureReportDetail is a failure report as the single GET shows it.
	FailureReportDetail = reports.FailureReportDetail
)

// FailureDraft is a failure report ready to be committed (IngestBatch
// Failures). After the commit, Outcome says what became of it.
type FailureDraft struct {
	rep  FailureReport
	mask byte
	dkim [2]*string
	hdrs []FailureHeader

	val, hdrVal []byte
	out         FailureOutcome
}

// FailureOutcome is what a commit did with one failure draft.
type FailureOutcome struct {
	// Stored is set when the report is now visible.
	Stored bool
	// DuplicateID is the report already stored with the same reporter,
	// source IP, message id and arrival date for the domain, when that kept
	// this one out.
	DuplicateID string
	// DomainGone is set when the domain was deleted before the commit.
	DomainGone bool
}

// NewFailureDraft prepares d for storing. The caller sets DomainID, Domain
// and OrgID (from routing), ReceivedAt and what the report says; the draft
// gets a new ID. Times are kept in UTC at second precision. A zero
// ArrivalDate becomes ReceivedAt, and so does one after ReceivedAt (a
// message cannot arrive after the report about it, and retention and the
// daily counts go by the arrival date). AuthFailure keeps only "dmarc",
// "spf" and "dkim", in that order; AuthFailureReported (see keepReported)
// defaults to them; FeedbackType defaults to "auth-failure";
// SourceIP must be an IP address (stored in its canonical form); empty
// strings become nil, text over 1024 bytes is cut, and at most 1,000
// headers (1 MiB) are kept. Errors: ErrInvalid for a malformed domain or
// organization id, a zero ReceivedAt or a SourceIP that is not an IP.
func NewFailureDraft(d *FailureReportDetail) (*FailureDraft, error) {
	if d == nil || d.FailureReport == nil {
		return nil, errorf(ErrInvalid, "failure report is required")
	}
	r := *d.FailureReport
	if !ValidID(r.DomainID) || !ValidID(r.OrgID) {
		return nil, errorf(ErrInvalid, "failure report needs a domain and an organization")
	}
	if r.ReceivedAt.IsZero() {
		return nil, errorf(ErrInvalid, "failure report needs a receive time")
	}
	if r.SourceIP != nil && *r.SourceIP != "" {
		ip, err := netip.ParseAddr(*r.SourceIP)
		if err != nil || ip.Zone() != "" {
			return nil, errorf(ErrInvalid, "failure report source IP %q is not an IP address", *r.SourceIP)
		}
		r.SourceIP = new(ip.Unmap().String())
	}
	r.ID = NewID()
	r.ReceivedAt = r.ReceivedAt.UTC().Truncate(time.Second)
	r.ArrivalDate = r.ArrivalDate.UTC().Truncate(time.Second)
	if r.ArrivalDate.IsZero() || r.ArrivalDate.After(r.ReceivedAt) {
		r.ArrivalDate = r.ReceivedAt
	}
	if r.FeedbackType == "" {
		r.FeedbackType = "auth-failure"
	}
	r.FeedbackType = reports.CutText(r.FeedbackType)
	r.Domain = reports.CutText(r.Domain)
	for _, p := range []**string{&r.Reporter, &r.SourceIP, &r.OriginalMailFrom, &r.OriginalRcptTo,
		&r.ReportedDomain, &r.Subject, &r.MessageID, &r.DeliveryResult,
		&r.AuthenticationResults.DMARC, &r.AuthenticationResults.SPF, &r.AuthenticationResults.DKIM} {
		*p = reports.CutOpt(*p)
	}
	f := &FailureDraft{rep: r, mask: reports.FailMask(r.AuthFailure)}
	f.rep.AuthFailure = reports.FailChecksOf(f.mask)
	f.rep.AuthFailureReported = reports.KeepReported(r.AuthFailureReported, f.rep.AuthFailure)
	f.rep.Identity = reports.CutIdentity(r.Identity)
	f.rep.Geo = reports.CloneGeo(r.Geo)
	f.dkim = [2]*string{reports.CutOpt(d.DKIMDomain), reports.CutOpt(d.DKIMSelector)}
	f.hdrs = reports.KeepHeaders(d.Headers)
	f.val = reports.AppendFailure(nil, &f.rep, f.mask, f.dkim)
	if f.hdrs != nil {
		f.hdrVal = reports.AppendFailureHeaders(nil, f.hdrs)
	}
	return f, nil
}

// Report returns the report as it will be stored.
func (f *FailureDraft) Report() FailureReport { return f.rep }

// Outcome returns what the last commit of the draft did with it.
func (f *FailureDraft) Outcome() FailureOutcome { return f.out }

// FailureFilter selects failure reports for ListFailureReports. DateFrom
// and DateTo bound the arrival date (both included); SourceIP is an exact
// IP in canonical form (as netip.Addr.String gives it); AuthFailure is
// "dmarc", "spf" or "dkim".
type FailureFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
	SourceIP         string
	AuthFailure      string
	Page             Page
	// After, when set, is a previous page's Next: the listing resumes
	// after that report, in the same order, and Page.Page is ignored.
	After []byte
}

// ListFailureReports returns one page of the failure reports of
// organization orgID that pass f, newest arrival date first (ties: newest
// stored first), and how many pass in all. The filters are read from the
// index, never from the reports. Errors: ErrNotFound when f.DomainID is not
// a domain of the organization, ErrInvalid for a page or limit below 1 or
// an unknown f.AuthFailure.
func (db *DB) ListFailureReports(orgID string, f FailureFilter) ([]*FailureReport, int, error) {
	p, err := db.ListFailureReportsPage(orgID, f)
	if err != nil {
		return nil, 0, err
	}
	return p.Reports, p.Total, nil
}

// FailureReportPage is one page of a failure report listing.
type FailureReportPage struct {
	Reports []*FailureReport
	// Total is how many reports pass the filter, on every page.
	Total int
	// Next resumes the listing after the page's last report (pass it as
	// FailureFilter.After); nil when nothing follows.
	Next []byte
}

// ListFailureReportsPage is ListFailureReports with the position of the
// next page. An After that is no position is ErrInvalid.
func (db *DB) ListFailureReportsPage(orgID string, f FailureFilter) (*FailureReportPage, error) {
	skip, err := f.Page.offset()
	if f.After != nil {
		skip, err = 0, f.Page.offset1()
		if err == nil && len(f.After) != failTimeKeyLen-idLen {
			err = errorf(ErrInvalid, "invalid cursor")
		}
	}
	if err != nil {
		return nil, err
	}
	var mask byte
	if f.AuthFailure != "" {
		if mask = reports.FailureCheckBit(f.AuthFailure); mask == 0 {
			return nil, errorf(ErrInvalid, "the failed check must be dmarc, spf or dkim")
		}
	}
	page := &FailureReportPage{Reports: []*FailureReport{}}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		owner, bucket := orgID, bucketFailuresByOrg
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
			owner, bucket = f.DomainID, bucketFailuresByDomain
		}
		var ids []string
		page.Total, ids, page.Next = scanFailures(tx.Bucket(bucket), owner, f, mask, skip, f.Page.Limit)
		for _, id := range ids {
			det, err := getFailure(tx, id, false)
			if err != nil {
				return err
			}
			page.Reports = append(page.Reports, det.FailureReport)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list failure reports", err)
	}
	return page, nil
}

// FindFailureReport returns failure report id of organization orgID with
// its headers. ErrNotFound also when it belongs to another organization or
// id is malformed.
func (db *DB) FindFailureReport(orgID, id string) (*FailureReportDetail, error) {
	var det *FailureReportDetail
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if det, err = getFailure(tx, id, true); err != nil {
			return err
		}
		if det.OrgID != orgID {
			det = nil
			return errFailureNotFound()
		}
		return nil
	})
	if err != nil {
		return nil, wrap("find failure report", err)
	}
	return det, nil
}

// FailureDomainCount counts the failure reports of one domain.
type FailureDomainCount struct {
	DomainID string `json:"domain_id"`
	Domain   string `json:"domain"`
	Count    int64  `json:"count"`
}

// FailureDayCount counts the failure reports that arrived on one UTC day.
type FailureDayCount struct {
	Date  string `json:"date"`
	Count int64  `json:"count"`
}

// FailureSummary is API.md's forensic summary: the last FailureSummaryDays
// UTC days, today included, up to now.
type FailureSummary struct {
	WindowStart   time.Time            `json:"window_start"`
	WindowEnd     time.Time            `json:"window_end"`
	Total         int64                `json:"total"`
	ByAuthFailure FailureCheckCounts   `json:"by_auth_failure"`
	ByDomain      []FailureDomainCount `json:"by_domain"`
	TopSourceIPs  []FailureSourceCount `json:"top_source_ips"`
	ByDay         []FailureDayCount    `json:"by_day"`
}

// FailureStats is API.md's forensic statistics.
type FailureStats struct {
	Total         int64                 `json:"total"`
	ByAuthFailure FailureCheckCounts    `json:"by_auth_failure"`
	ByCountry     []FailureCountryCount `json:"by_country"`
	ByASN         []FailureASNCount     `json:"by_asn"`
	ByDomain      []FailureDomainCount  `json:"by_domain"`
	TopSourceIPs  []FailureSourceCount  `json:"top_source_ips"`
}

// FailureStatsFilter narrows FailureStatistics: one domain, and arrival
// dates from DateFrom to DateTo (both included, to the second).
type FailureStatsFilter struct {
	DomainID         string
	DateFrom, DateTo *time.Time
}

const (
	// FailureSummaryDays is the window of FailureSummary, in UTC days.
	FailureSummaryDays = 7
	// FailureTopSources is how many source IPs the summary and statistics
	// list.
	FailureTopSources = 10
)

// The counts of failure report statistics are package reports' values.
type (
	// FailureCheckCounts counts failure reports per failed check.
	FailureCheckCounts = reports.FailureCheckCounts
	// FailureSourceCount counts the failure reports about one source IP.
	FailureSourceCount = reports.FailureSourceCount
	// FailureCountryCount counts the failure reports from one country.
	FailureCountryCount = reports.FailureCountryCount
	// FailureASNCount counts the failure reports from one autonomous
	// system.
	FailureASNCount = reports.FailureASNCount
)

// FailureSummary returns the failure reports of organization orgID that
// arrived in the last 7 UTC days (today, up to now, and the 6 days before),
// from the day roll-ups: its cost does not grow with the number of reports.
// ByDay has 7 entries, oldest first, zeros included; ByDomain is ordered by
// count, most first; TopSourceIPs has the 10 IPs with the most reports.
func (db *DB) FailureSummary(orgID string, now time.Time) (*FailureSummary, error) {
	now = now.UTC().Truncate(time.Second)
	today := days.Of(now)
	first := today - min(today, FailureSummaryDays-1)
	s := &FailureSummary{WindowStart: days.Start(first), WindowEnd: now, ByDay: make([]FailureDayCount, 0, FailureSummaryDays)}
	for d := first; d <= today; d++ {
		s.ByDay = append(s.ByDay, FailureDayCount{Date: days.Date(d)})
	}
	acc := reports.NewFailSummaryAcc()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		err := eachRawFailureDay(tx, orgID, first, today, func(day uint32, domainID string, raw []byte) error {
			n, err := acc.Add(raw, domainID)
			s.ByDay[day-first].Count += n
			return err
		})
		if err != nil {
			return err
		}
		s.ByDomain, err = domainCounts(tx, acc.Domains())
		return err
	})
	if err != nil {
		return nil, wrap("failure summary", err)
	}
	s.Total, s.TopSourceIPs = acc.Total(), acc.Top(FailureTopSources)
	s.ByAuthFailure = acc.ByAuthFailure()
	return s, nil
}

// FailureStatistics returns the statistics of the failure reports of
// organization orgID, all time unless f narrows them. Whole UTC days come
// from the day roll-ups; the reports of a day that the date range cuts are
// read one by one. Errors: ErrNotFound when f.DomainID is not a domain of
// the organization, ErrRangeReversed (an ErrInvalid) when f.DateTo is
// before f.DateFrom.
func (db *DB) FailureStatistics(orgID string, f FailureStatsFilter) (*FailureStats, error) {
	if f.DateFrom != nil && f.DateTo != nil && f.DateTo.Before(*f.DateFrom) {
		return nil, ErrRangeReversed
	}
	all := reports.NewFailureDay()
	perDomain := map[string]int64{}
	var st *FailureStats
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
		}
		add := func(domainID string, day *reports.FailureDay) {
			if f.DomainID == "" || f.DomainID == domainID {
				perDomain[domainID] += day.Total()
				all.Merge(day)
			}
		}
		if err := statsRangeDays(tx, orgID, f, add); err != nil {
			return err
		}
		byDomain, err := domainCounts(tx, perDomain)
		if err != nil {
			return err
		}
		st = &FailureStats{Total: all.Total(), ByAuthFailure: all.ByAuthFailure(), ByCountry: all.ByCountry(),
			ByASN: all.ByASN(), ByDomain: byDomain, TopSourceIPs: all.Top(FailureTopSources)}
		return nil
	})
	if err != nil {
		return nil, wrap("failure statistics", err)
	}
	return st, nil
}

// failureDeleteStep is how many failure reports one transaction of
// DeleteFailureReportsBefore deletes: a long backlog is deleted without one
// huge transaction holding the writer.
const failureDeleteStep = 1000

// DeleteFailureReportsBefore deletes every failure report that arrived
// before t, with its headers, index entries and its share of the daily
// counts, in transactions of at most 1,000 reports, and returns how many it
// deleted. Run by the retention job (serve --forensic-retention). An error
// leaves the reports of the failed transaction in place; those deleted
// before stay deleted.
func (db *DB) DeleteFailureReportsBefore(t time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			ids := expiredFailures(tx, unixKey(t), failureDeleteStep)
			rolls := failDays{}
			for _, id := range ids {
				if err := deleteFailure(tx, id, rolls); err != nil {
					return err
				}
			}
			n = len(ids)
			return rolls.put(tx)
		})
		if err != nil {
			return total, wrap("delete failure reports", err)
		}
		total += n
		if n < failureDeleteStep {
			return total, nil
		}
	}
}

func errFailureNotFound() error { return errorf(ErrNotFound, "forensic report not found") }
