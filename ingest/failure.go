package ingest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/arf"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/store"
)

// Failure (forensic, RUF) reports come in as mails through the same ways
// as aggregate reports. An input in which the aggregate walk found no
// report is read a second time, as a mail of failure reports
// (arf.Extract): report mails are small, and this keeps the
// aggregate path, by far the busiest, as it was. Each failure report is
// routed like an aggregate report (the recipient's domain for SMTP; the
// reported domain, then its organizational domain, on import), geolocated,
// and committed through the pipeline's writer with the store's dedup
// (reporter, source IP, message id, arrival date per domain; for a report
// without Arrival-Date its mail's Date, else its content, in place of the
// arrival date: see failureIdentity). A feedback
// report that is not about authentication (abuse, fraud...) is no DMARC
// report: the input is quarantined with that reason. The original
// message's body is never kept or logged: the parser does not keep it.

// failures reads the input as a mail of failure reports and stores those
// it can route. It returns the result when the input is settled (failure
// reports stored, or found stored already), nil and nil when the input
// is to be quarantined (with the reasons added to j.problems), or an error
// when the input fails as a whole (its reader, the store, ErrAmbiguous).
func (j *job) failures() (*Result, error) {
	r, whole, err := j.in.again()
	if err != nil {
		return nil, err
	}
	if !whole {
		j.problems = append(j.problems, "too large to be read again as a failure report mail")
		return nil, nil
	}
	aggProblems := len(j.problems)
	src := &errReader{r: r}
	reps, err := arf.Extract(src, j.p.cfg.Limits)
	if src.err != nil {
		return nil, fmt.Errorf("ingest: re-reading input: %w", src.err)
	}
	if err != nil {
		if !errors.Is(err, container.ErrNoReport) {
			// It is a feedback mail: why it is unusable comes first.
			j.problems = append([]string{reasonOf(err)}, j.problems...)
		}
		return nil, nil
	}
	drafts, err := j.failureDrafts(reps)
	if err == nil && len(drafts) == 0 && len(j.expired) > 0 {
		return &Result{Reports: []Outcome{}, Expired: j.expired, Problems: j.problems[aggProblems:]}, nil
	}
	if err != nil || len(drafts) == 0 {
		return nil, err
	}
	res, err := j.commitFailures(drafts)
	if res != nil {
		// The aggregate walk's "no aggregate report" is no problem here.
		res.Problems = j.problems[aggProblems:]
		res.Expired = j.expired
	}
	return res, err
}

// failureDrafts routes and converts the reports of the mail. Those without
// a domain are described in j.problems. It fails with ErrAmbiguous only
// when that left nothing to store.
func (j *job) failureDrafts(reps []*arf.Report) ([]*store.FailureDraft, error) {
	var drafts []*store.FailureDraft
	var ambig error
	for _, rep := range reps {
		dom, why, err := j.failureDomain(rep)
		switch {
		case errors.Is(err, ErrAmbiguous):
			if ambig == nil {
				ambig = err
			}
			j.problems = append(j.problems, reasonOf(err))
			continue
		case err != nil:
			return nil, err
		case dom.ID == "":
			j.problems = append(j.problems, why)
			continue
		}
		if ret := j.p.cfg.FailureRetention; ret > 0 {
			arrival := failureArrival(rep)
			if arrival.IsZero() || arrival.After(j.d.ReceivedAt) {
				arrival = j.d.ReceivedAt
			}
			if arrival.Before(j.p.cfg.Now().Add(-ret)) {
				j.expired = append(j.expired, Expired{Kind: KindFailure, Reporter: rep.Reporter, Domain: dom.Name, Date: arrival.UTC(), Window: Window(ret)})
				continue
			}
		}
		draft, err := store.NewFailureDraft(j.failureOf(rep, dom))
		if err != nil {
			from := "failure report"
			if strings.TrimSpace(rep.Reporter) != "" {
				from += " from " + rep.Reporter
			}
			j.problems = append(j.problems, from+": "+reasonOf(err))
			continue
		}
		drafts = append(drafts, draft)
	}
	if len(drafts) == 0 && ambig != nil {
		return nil, ambig
	}
	return drafts, nil
}

// failureDomain is the domain a failure report belongs to: the domain
// whose reporting address received it (SMTP: whatever domain the report
// names, since only that domain's owner publishes the address in ruf=), or
// on import the registered domain of its reported domain. A zero DomainRef
// comes with the reason there is none.
func (j *job) failureDomain(rep *arf.Report) (store.DomainRef, string, error) {
	var none store.DomainRef
	if j.d.Source == SourceSMTP {
		dom, err := j.route.recipientDomain()
		if err != nil {
			return none, "", err
		}
		if dom == nil {
			return none, fmt.Sprintf("no domain has the reporting address %q", j.d.Recipient), nil
		}
		return store.DomainRef{ID: dom.ID, OrgID: dom.OrgID, Name: dom.Name}, "", nil
	}
	if rep.ReportedDomain == "" {
		return none, "failure report names no reported domain", nil
	}
	return j.route.byImport(rep.ReportedDomain)
}

// failureArrival is when the reported message arrived: the report's
// Arrival-Date, else the report mail's Date (reporters without
// Arrival-Date report as the message arrives), else zero (the store then
// takes the receive time).
func failureArrival(rep *arf.Report) time.Time {
	if !rep.ArrivalDate.IsZero() {
		return rep.ArrivalDate
	}
	return rep.ReportDate
}

// failureIdentity tells a report without Arrival-Date from another report
// of the same reporter about the same message, whenever and by whichever
// way it comes again (store.FailureReport.Identity): the report mail's
// Date, else a hash of what the report says. "" for a report with
// Arrival-Date, whose identity it is.
func failureIdentity(rep *arf.Report) string {
	switch {
	case !rep.ArrivalDate.IsZero():
		return ""
	case !rep.ReportDate.IsZero():
		return "date " + strconv.FormatInt(rep.ReportDate.Unix(), 10)
	}
	sum := rep.Fingerprint()
	return "sha256 " + hex.EncodeToString(sum[:])
}

// failureOf is the report to store: rep routed to dom, received now,
// its source IP geolocated.
func (j *job) failureOf(rep *arf.Report, dom store.DomainRef) *store.FailureReportDetail {
	r := &store.FailureReport{
		DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		ReceivedAt: j.d.ReceivedAt, ArrivalDate: failureArrival(rep), Identity: failureIdentity(rep),
		Reporter: nonEmpty(rep.Reporter), OriginalMailFrom: nonEmpty(rep.OriginalMailFrom),
		ReportedDomain: nonEmpty(rep.ReportedDomain), Subject: nonEmpty(rep.Subject),
		MessageID: nonEmpty(rep.MessageID), FeedbackType: rep.FeedbackType,
		AuthFailure: rep.FailedChecks(), AuthFailureReported: rep.AuthFailure, DeliveryResult: nonEmpty(rep.DeliveryResult),
		AuthenticationResults: store.FailureAuthResults{DMARC: nonEmpty(rep.AuthResults["dmarc"]),
			SPF: nonEmpty(rep.AuthResults["spf"]), DKIM: nonEmpty(rep.AuthResults["dkim"])},
	}
	if len(rep.OriginalRcptTo) > 0 {
		r.OriginalRcptTo = nonEmpty(rep.OriginalRcptTo[0])
	}
	if rep.SourceIP.IsValid() {
		r.SourceIP = new(rep.SourceIP.String())
		if g := j.locate(rep.SourceIP); g != nil {
			r.Geo = new(*g) // the report keeps it: its own copy
		}
	}
	d := &store.FailureReportDetail{FailureReport: r, DKIMDomain: nonEmpty(rep.DKIMDomain), DKIMSelector: nonEmpty(rep.DKIMSelector)}
	if rep.Headers != nil {
		d.Headers = make([]store.FailureHeader, len(rep.Headers))
		for i, h := range rep.Headers {
			d.Headers[i] = store.FailureHeader{Name: h.Name, Value: h.Value}
		}
	}
	return d
}

// commitFailures hands the drafts to the writer and turns their outcomes
// into the result, in mail order. It returns nil and nil when none was
// stored or found stored (their domains were deleted meanwhile).
func (j *job) commitFailures(drafts []*store.FailureDraft) (*Result, error) {
	j.doneProducing()
	w := j.newWork(store.IngestBatch{Failures: drafts}, len(drafts), false)
	if err := j.p.submit(j.ctx, w); err != nil {
		return nil, err
	}
	<-w.done
	if w.err != nil {
		return nil, w.err
	}
	res := &Result{Reports: []Outcome{}}
	for _, f := range drafts {
		o, rep := f.Outcome(), f.Report()
		switch {
		case o.Stored:
			res.Reports = append(res.Reports, Outcome{Kind: KindFailure, ReportID: rep.ID, Domain: rep.Domain})
			j.p.met.report(j.d.Source, KindFailure, "stored", 0)
		case o.DuplicateID != "":
			res.Reports = append(res.Reports, Outcome{Kind: KindFailure, ReportID: o.DuplicateID, Domain: rep.Domain, Duplicate: true})
			j.p.met.report(j.d.Source, KindFailure, "duplicate", 0)
		default:
			j.problems = append(j.problems, fmt.Sprintf("domain %s was deleted before its failure report was stored", rep.Domain))
		}
	}
	if len(res.Reports) == 0 {
		return nil, nil
	}
	return res, nil
}

// again returns a reader of the whole input from its start, for a second
// parse. A reader that can seek is read again; otherwise the rest of the
// input is read (and kept), then the bytes kept are read: whole is false
// when the input was larger than what is kept. Errors are the reader's.
func (in *input) again() (r io.Reader, whole bool, err error) {
	if in.seek != nil {
		if _, err := in.seek.Seek(in.start, io.SeekStart); err != nil {
			return nil, false, fmt.Errorf("ingest: re-reading input: %w", err)
		}
		return in.seek, true, nil
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return nil, false, fmt.Errorf("ingest: reading input: %w", err)
	}
	if err := in.failed(); err != nil {
		return nil, false, err
	}
	if in.n > in.keptN {
		return nil, false, nil
	}
	rs := make([]io.Reader, len(in.kept))
	for i, b := range in.kept {
		rs[i] = bytes.NewReader(b)
	}
	return io.MultiReader(rs...), true, nil
}

// errReader remembers the first error of r other than io.EOF: an input
// whose bytes cannot all be read again fails instead of being quarantined
// with a misleading reason.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}
