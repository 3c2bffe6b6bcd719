package ingest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc/aggregate"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
)

// SMTP TLS reports (RFC 8460) come in by every way aggregate reports do,
// and over HTTPS. They are found in the same walk of the input as
// aggregate reports (container.WalkKinds): a JSON payload, bare or gzip
// (application/tlsrpt+json, application/tlsrpt+gzip, or any part or file
// whose bytes sniff as such), is taken when its first bytes look like a
// TLS report (tlsrpt.LooksLikeTLSReport); names and MIME types are not
// trusted. Each is parsed under tlsrpt's caps, routed (tlsDomain), and
// committed with the input's aggregate reports in one group commit; the
// store drops duplicates (organization name + report id + domain). One
// that can never be stored is a problem of the input: if nothing else in
// it is usable, the input is quarantined (or, over HTTPS, refused) with
// that reason.

// matchPayload says which payloads of the walk the pipeline reads:
// aggregate reports (not over HTTPS: that way in is for TLS reports) and
// TLS reports.
func (j *job) matchPayload(k container.Kind, head []byte) bool {
	switch k {
	case container.KindXML:
		return j.d.Source != SourceHTTPS && aggregate.LooksLikeReport(head)
	case container.KindJSON:
		return tlsrpt.LooksLikeTLSReport(head)
	}
	return false
}

// walk finds the input's reports; like aggregate.Extract, with TLS
// reports beside aggregate ones.
func (j *job) walk() error {
	n, err := container.WalkKinds(j.in, j.p.cfg.Limits, j.matchPayload, func(pl container.Payload) error {
		if pl.Kind == container.KindJSON {
			return j.tlsPayload(pl)
		}
		return j.payload(pl)
	})
	if err == nil && n == 0 {
		// Said once: "no ... report in the input", not followed by
		// ErrNoReport's own words. Failure reports are looked for after
		// (failure.go), so the words cover them too.
		msg := "no DMARC or TLS report in the input"
		if j.d.Source == SourceHTTPS {
			msg = "no TLS report in the input"
		}
		err = container.NoReport(msg)
	}
	return err
}

// tlsPayload parses, routes and drafts one TLS report. It returns an
// error only to stop the walk: when the input as a whole fails.
func (j *job) tlsPayload(pl container.Payload) error {
	if err := j.ctx.Err(); err != nil {
		return j.fail(fmt.Errorf("ingest: %w", err))
	}
	rep, err := tlsrpt.Parse(pl.Body, tlsrpt.Limits{})
	if err != nil {
		return j.problem(pl.Name, err)
	}
	dom, why, err := j.route.tlsDomain(rep)
	switch {
	case errors.Is(err, ErrAmbiguous):
		if j.ambig == nil {
			j.ambig = err
		}
		j.problems = append(j.problems, reasonOf(err))
		return nil
	case err != nil:
		return j.fail(err)
	case dom.ID == "":
		j.problems = append(j.problems, why)
		return nil
	}
	draft, err := store.NewTLSDraft(store.TLSInput{OrgID: dom.OrgID, DomainID: dom.ID, Report: rep, ReceivedAt: j.d.ReceivedAt})
	if err != nil {
		return j.problem(pl.Name, err)
	}
	j.tls = append(j.tls, draft)
	j.places = append(j.places, place{tls: draft, domain: dom.Name})
	return nil
}

// tlsDomain is the domain a TLS report belongs to. To a reporting address
// (SMTP, HTTPS): that address's domain when the report's policy-domain is
// it or a subdomain of it, or names none; else the policy-domain (then its
// organizational domain) among the domains of the address's organization
// (one address may serve several domains' TLS-RPT records). On import:
// the policy-domain like an aggregate report's. A zero DomainRef comes
// with the reason there is none.
func (r *router) tlsDomain(rep *tlsrpt.Report) (store.DomainRef, string, error) {
	var none store.DomainRef
	name := ""
	for _, p := range rep.Policies {
		if name = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(p.Domain)), "."); name != "" {
			break
		}
	}
	if !r.byRecipient() {
		if name == "" {
			return none, fmt.Sprintf("TLS report %q of %s names no policy-domain", rep.ReportID, rep.OrganizationName), nil
		}
		return r.byName(r.d.OrgID, name)
	}
	dom, err := r.recipientDomain()
	if err != nil {
		return none, "", err
	}
	switch {
	case dom == nil:
		return none, fmt.Sprintf("no domain has the reporting address %q", r.d.Recipient), nil
	case name == "" || name == dom.Name || strings.HasSuffix(name, "."+dom.Name):
		return store.DomainRef{ID: dom.ID, OrgID: dom.OrgID, Name: dom.Name}, "", nil
	}
	ref, _, err := r.byName(dom.OrgID, name)
	if err != nil || ref.ID != "" {
		return ref, "", err
	}
	return none, fmt.Sprintf("TLS report for %s belongs to no domain of the organization of reporting address %s", name, r.d.Recipient), nil
}

// tlsOutcome turns what the commit did with a TLS draft into the result.
func (j *job) tlsOutcome(res *Result, s place) {
	o, rep := s.tls.Outcome(), s.tls.Report()
	switch {
	case o.Stored:
		res.Reports = append(res.Reports, Outcome{Kind: KindTLS, ReportID: rep.ID, Domain: s.domain})
		j.p.met.report(j.d.Source, KindTLS, "stored", 0)
	case o.DuplicateID != "":
		res.Reports = append(res.Reports, Outcome{Kind: KindTLS, ReportID: o.DuplicateID, Domain: s.domain, Duplicate: true})
		j.p.met.report(j.d.Source, KindTLS, "duplicate", 0)
	default:
		j.problems = append(j.problems, fmt.Sprintf("domain %s was deleted before its TLS report was stored", s.domain))
	}
}
