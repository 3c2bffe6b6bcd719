package app

import (
	"context"
	"errors"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// errNoDNS is the Internal error of an App built without DNS.
var errNoDNS = errors.New("app: no DNS checker configured")

// domainName validates and normalizes a domain name sent in field:
// Invalid naming the field when it is blank or no domain name.
func domainName(field, v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", invalid(nil, FieldError{Field: field, Message: "is required"})
	}
	name, err := dmarc.NormalizeDomain(v)
	if err != nil {
		return "", invalid(err, FieldError{Field: field, Message: strings.TrimPrefix(err.Error(), "dmarc: ")})
	}
	return name, nil
}

// CreateDomain registers domain name (as typed) for the actor's
// organization: a new reporting address and the suggested record, which
// never weakens what the domain publishes (DNSUnavailable, creating
// nothing, when the DNS cannot tell). It returns the domain and every DNS
// record to publish. Errors: Invalid for a bad name, PlanLimit, Conflict.
func (a *App) CreateDomain(ctx context.Context, actor Actor, name string) (*store.Domain, []dnscheck.DNSRecord, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, nil, err
	}
	name, err := domainName("name", name)
	if err != nil {
		return nil, nil, err
	}
	if a.cfg.DNS == nil {
		return nil, nil, errNoDNS
	}
	email := store.NewReportingLocal() + "@" + a.cfg.ReportingDomain
	dctx, cancel := a.dnsContext(ctx)
	defer cancel()
	sug, err := a.cfg.DNS.SuggestRecord(dctx, name, email)
	if err != nil {
		return nil, nil, err
	}
	d := &store.Domain{
		OrgID:               actor.orgID(),
		Name:                name,
		ReportingEmail:      email,
		DMARCRecord:         sug.Record,
		RegisteredDNSRecord: sug.Published,
	}
	if err := a.db.CreateDomain(d); err != nil {
		return nil, nil, err
	}
	a.audit(actor, "domain.create", d.Name)
	return d, a.DomainRecords(d), nil
}

// DomainRecords is every DNS record domain d publishes for dmarcd (the
// dns_records of its creation, a pending domain's page): its DMARC
// record, the authorization in the reporting domain's zone, and its
// TLS-RPT record, with the HTTPS URI when the public URL is https.
func (a *App) DomainRecords(d *store.Domain) []dnscheck.DNSRecord {
	return dnscheck.DomainRecords(d.Name, d.DMARCRecord, d.ReportingEmail, a.cfg.ReportingDomain, a.cfg.PublicURL)
}

// VerifyDomain checks that domain id publishes its reporting address and,
// when it does, makes it active. Errors: NotFound, Unverified with the
// reason, DNSUnavailable.
func (a *App) VerifyDomain(ctx context.Context, actor Actor, id string) (*store.Domain, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, err
	}
	d, err := a.db.FindDomain(actor.orgID(), id)
	if err != nil {
		return nil, notFound(err, "domain")
	}
	if a.cfg.DNS == nil {
		return nil, errNoDNS
	}
	dctx, cancel := a.dnsContext(ctx)
	defer cancel()
	if a.cfg.Published != nil {
		a.cfg.Published.ForgetPublished(d.Name) // this reads the domain's DNS afresh: so does the advice next
	}
	if err := a.cfg.DNS.Verify(dctx, d.Name, d.ReportingEmail); err != nil {
		return nil, err
	}
	now := a.now()
	d, err = a.db.UpdateDomain(actor.orgID(), d.ID, func(d *store.Domain) error {
		d.Status = store.DomainActive
		d.VerifiedAt = &now
		return nil
	})
	return d, notFound(err, "domain")
}

// DeleteDomain deletes domain id with its reports, statistics and alerts.
func (a *App) DeleteDomain(_ context.Context, actor Actor, id string) error {
	if err := Authorize(actor, Write); err != nil {
		return err
	}
	d, err := a.db.FindDomain(actor.orgID(), id)
	if err != nil {
		return notFound(err, "domain")
	}
	if err := a.db.DeleteDomain(actor.orgID(), id); err != nil {
		return notFound(err, "domain")
	}
	a.audit(actor, "domain.delete", d.Name)
	return nil
}

// CheckDMARC looks up and judges the DMARC record of any domain (given as
// field "domain"); it changes nothing.
func (a *App) CheckDMARC(ctx context.Context, actor Actor, domain string) (*dnscheck.CheckResult, error) {
	name, err := checkedName(actor, domain)
	if err != nil {
		return nil, err
	}
	if a.cfg.DNS == nil {
		return nil, errNoDNS
	}
	dctx, cancel := a.dnsContext(ctx)
	defer cancel()
	return a.cfg.DNS.CheckDMARC(dctx, name)
}

// CheckTLS looks up and judges the MTA-STS policy and TLS-RPT record of
// any domain (given as field "domain"), fetching the policy file; it
// changes nothing.
func (a *App) CheckTLS(ctx context.Context, actor Actor, domain string) (*dnscheck.TLSResult, error) {
	name, err := checkedName(actor, domain)
	if err != nil {
		return nil, err
	}
	if a.cfg.TLS == nil {
		return nil, errors.New("check-tls is not configured")
	}
	// DNS lookups and the 5 s policy fetch.
	tctx, cancel := context.WithTimeout(ctx, a.cfg.DNSTimeout+dnscheck.MTASTSBudget)
	defer cancel()
	return a.cfg.TLS.CheckTLS(tctx, name)
}

// checkedName authorizes a check of any domain (a read: it changes
// nothing) and validates the name sent as field "domain".
func checkedName(actor Actor, domain string) (string, error) {
	if err := Authorize(actor, Read); err != nil {
		return "", err
	}
	return domainName("domain", domain)
}

// DMARCResolver is the resolver of the App's DNS checker when it is a
// *dnscheck.Checker, else nil: sender views built without one read
// published records through it.
func (a *App) DMARCResolver() dnscheck.TXTResolver {
	if c, ok := a.cfg.DNS.(*dnscheck.Checker); ok && c.Resolver != nil {
		return c.Resolver
	}
	return nil
}
