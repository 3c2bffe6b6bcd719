package ingest

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dmarc/aggregate"
	"github.com/dmarcd/dmarcd/store"
)

// router decides which registered domain a report belongs to.
//
// SMTP: the report arrived at a domain's reporting address, so it belongs
// to that domain when its policy_published domain is the domain or a
// subdomain of it (a report for a subdomain covers mail sent from it). A
// report for an unrelated domain is not stored: someone pointed rua= of a
// domain they do not own at us, or misaddressed it. A report that names no
// policy domain at all (broken reporters send those) is taken on the word
// of the address it came to.
//
// Import: the report's policy_published domain, exactly, then its
// organizational domain (dmarc.OrganizationalDomain), among the domains of
// Arrival.OrgID, or of every organization when it is empty, in which case
// a name registered by several organizations is ErrAmbiguous.
type router struct {
	db *store.DB
	d  Arrival
	// look, when set, answers the lookups by name inside the read
	// transaction the job's per-report lookups share (store.Lookup).
	look *store.Lookup

	rcptDone bool
	rcpt     *store.Domain // the recipient's domain, nil when unknown
}

// domain returns the report's domain, or a zero DomainRef and a reason it
// has none. Errors: ErrAmbiguous, and store failures.
func (r *router) domain(h *aggregate.Header) (store.DomainRef, string, error) {
	name := strings.TrimSuffix(strings.ToLower(h.Policy.Domain), ".")
	if r.byRecipient() {
		return r.bySMTP(name)
	}
	return r.byImport(name)
}

// byRecipient reports whether the input came to a reporting address (SMTP,
// HTTPS), which then decides its domain.
func (r *router) byRecipient() bool { return r.d.Source == SourceSMTP || r.d.Source == SourceHTTPS }

func (r *router) bySMTP(name string) (store.DomainRef, string, error) {
	var none store.DomainRef
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
	return none, fmt.Sprintf("report for %s does not belong to %s, the domain of reporting address %s", name, dom.Name, r.d.Recipient), nil
}

func (r *router) recipientDomain() (*store.Domain, error) {
	if !r.rcptDone {
		dom, err := r.db.FindDomainByReportingEmail(strings.Trim(r.d.Recipient, "<> "))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		r.rcpt, r.rcptDone = dom, true
	}
	return r.rcpt, nil
}

func (r *router) byImport(name string) (store.DomainRef, string, error) {
	var none store.DomainRef
	if name == "" {
		return none, "report names no policy_published domain", nil
	}
	return r.byName(r.d.OrgID, name)
}

// byName finds name, exactly, then its organizational domain, among the
// domains of orgID (of all organizations when "").
func (r *router) byName(orgID, name string) (store.DomainRef, string, error) {
	var none store.DomainRef
	named := r.db.DomainsNamed
	if r.look != nil {
		named = r.look.DomainsNamed
	}
	doms, err := named(orgID, name)
	if err == nil && len(doms) == 0 {
		if od := dmarc.OrganizationalDomain(name); od != name {
			doms, err = named(orgID, od)
		}
	}
	if err != nil {
		return none, "", fmt.Errorf("ingest: %w", err)
	}
	switch len(doms) {
	case 0:
		if r.look != nil {
			// The reason reads the store further: the caller asks
			// again outside the lookup's transaction (no nested ones).
			return none, "", nil
		}
		return none, r.unregisteredReason(name), nil
	case 1:
		return doms[0], "", nil
	}
	return none, "", fmt.Errorf("ingest: %s is registered by %d organizations, name one: %w", doms[0].Name, len(doms), ErrAmbiguous)
}

// unregisteredReason says why an import of a report for name found no
// domain: that none can be registered under that name, or what to do when the import was limited to one organization
// (--org) and another one has registered the name.
func (r *router) unregisteredReason(name string) string {
	reason := fmt.Sprintf("no registered domain for %s", name)
	var de *dmarc.DomainError
	if _, err := dmarc.NormalizeDomain(name); errors.As(err, &de) {
		// Retrying after registering the domain cannot help: say so.
		return reason + ", and it can never be registered: " + de.Reason
	}
	if r.d.OrgID == "" {
		return reason
	}
	doms, err := r.db.DomainsNamed("", name)
	if err == nil && len(doms) == 0 {
		if od := dmarc.OrganizationalDomain(name); od != name {
			doms, err = r.db.DomainsNamed("", od)
		}
	}
	if err != nil || len(doms) == 0 {
		return reason
	}
	var orgs []string
	for _, d := range doms {
		if org, err := r.db.FindOrganization(d.OrgID); err == nil {
			orgs = append(orgs, org.Name)
		}
	}
	if len(orgs) == 0 {
		return reason
	}
	return fmt.Sprintf("no registered domain for %s in the organization given with --org; %s is registered in organization %s: "+
		"import with --org %s (or without --org), then retry the quarantined entry", name, doms[0].Name,
		strings.Join(orgs, ", "), orgs[0])
}

// orgID is the organization a quarantine entry of this input belongs to,
// when one is known.
func (r *router) orgID() string {
	if r.byRecipient() {
		if dom, err := r.recipientDomain(); err == nil && dom != nil {
			return dom.OrgID
		}
		return ""
	}
	return r.d.OrgID
}

// reportOf is the report to store for a header routed to dom. Policy tags
// the report leaves out get their RFC 7489 defaults (pct 100, relaxed
// alignment), as the API shows them as plain values.
func reportOf(h *aggregate.Header, dom store.DomainRef, d Arrival) store.Report {
	pol := h.Policy
	pp := store.PolicyPublished{Domain: pol.Domain, P: pol.P, SP: nonEmpty(pol.SP), NP: nonEmpty(pol.NP),
		PCT: 100, ADKIM: pol.ADKIM, ASPF: pol.ASPF}
	if pol.PCT != nil {
		pp.PCT = *pol.PCT
	}
	if pp.ADKIM == "" {
		pp.ADKIM = "r"
	}
	if pp.ASPF == "" {
		pp.ASPF = "r"
	}
	return store.Report{
		DomainID: dom.ID, Domain: dom.Name, OrgID: dom.OrgID,
		OrgName: h.OrgName, OrgEmail: h.Email, ExternalReportID: h.ReportID,
		DateBegin: h.DateBegin, DateEnd: h.DateEnd, ReceivedAt: d.ReceivedAt,
		PolicyPublished: pp,
	}
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
