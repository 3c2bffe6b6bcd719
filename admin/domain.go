package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// Domains are the domain operations of 'dmarcd domain'. A domain is named
// by its name or id; orgRef (a name or id) picks the organization, "" the
// only one there is (adding) or the one that has the name (the others).
type Domains interface {
	// AddDomain registers name, as POST /domains does (both run
	// app.CreateDomain). With orgRef "" and
	// several organizations it is ErrInvalid naming them.
	AddDomain(ctx context.Context, orgRef, name string) (*AddedDomain, error)
	// ListDomains lists the domains of orgRef, of every organization
	// when "", by organization and name.
	ListDomains(ctx context.Context, orgRef string) ([]*DomainEntry, error)
	// VerifyDomain verifies a domain as POST /domains/{id}/verify does;
	// a record that does not list its address is ErrInvalid with the
	// reason.
	VerifyDomain(ctx context.Context, orgRef, domain string) (*DomainEntry, error)
	// DeleteDomain deletes a domain with its reports and alerts.
	DeleteDomain(ctx context.Context, orgRef, domain string) (*DomainEntry, error)
}

// DomainEntry is a domain with its organization (store.Domain's JSON
// leaves the organization out).
type DomainEntry struct {
	*store.Domain
	OrganizationID string `json:"organization_id"`
	Organization   string `json:"organization"`
}

// AddedDomain is what adding a domain answers: the domain and every DNS
// record to publish, as POST /domains answers (dns_records).
type AddedDomain struct {
	DomainEntry
	DNSRecords []dnscheck.DNSRecord `json:"dns_records"`
}

// AddDomain implements Domains: the application layer's CreateDomain,
// run by the operator within the organization.
func (l *Local) AddDomain(ctx context.Context, orgRef, name string) (*AddedDomain, error) {
	org, err := l.orgOrOnly(orgRef)
	if err != nil {
		return nil, err
	}
	d, records, err := l.app().CreateDomain(ctx, app.Operator(org), name)
	if err != nil {
		return nil, domainErr(err)
	}
	return &AddedDomain{DomainEntry: DomainEntry{Domain: d, OrganizationID: org.ID, Organization: org.Name}, DNSRecords: records}, nil
}

// ListDomains implements Domains.
func (l *Local) ListDomains(_ context.Context, orgRef string) ([]*DomainEntry, error) {
	orgs, err := l.orgsOf(orgRef)
	if err != nil {
		return nil, err
	}
	out := []*DomainEntry{}
	for _, org := range orgs {
		const limit = 1000
		for page := 1; ; page++ {
			doms, total, err := l.DB.ListDomains(org.ID, store.Page{Page: page, Limit: limit})
			if err != nil {
				return nil, err
			}
			for _, d := range doms {
				out = append(out, &DomainEntry{Domain: d, OrganizationID: org.ID, Organization: org.Name})
			}
			if page*limit >= total || len(doms) == 0 {
				break
			}
		}
	}
	return out, nil
}

// VerifyDomain implements Domains.
func (l *Local) VerifyDomain(ctx context.Context, orgRef, domain string) (*DomainEntry, error) {
	dom, org, err := l.findDomain(orgRef, domain)
	if err != nil {
		return nil, err
	}
	d, err := l.app().VerifyDomain(ctx, app.Operator(org), dom.ID)
	if err != nil {
		return nil, domainErr(err)
	}
	return &DomainEntry{Domain: d, OrganizationID: org.ID, Organization: org.Name}, nil
}

// DeleteDomain implements Domains.
func (l *Local) DeleteDomain(ctx context.Context, orgRef, domain string) (*DomainEntry, error) {
	dom, org, err := l.findDomain(orgRef, domain)
	if err != nil {
		return nil, err
	}
	if err := l.app().DeleteDomain(ctx, app.Operator(org), dom.ID); err != nil {
		return nil, domainErr(err)
	}
	return &DomainEntry{Domain: dom, OrganizationID: org.ID, Organization: org.Name}, nil
}

// findOrg is the organization orgRef names; not found names orgRef.
func (l *Local) findOrg(orgRef string) (*store.Organization, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &store.Error{Kind: store.ErrNotFound, Msg: fmt.Sprintf("no organization %s ('dmarcd org list' shows them)", orgRef)}
	}
	return org, err
}

// orgsOf is the organization orgRef names, or with "" every one.
func (l *Local) orgsOf(orgRef string) ([]*store.Organization, error) {
	if orgRef == "" {
		return l.DB.ListOrganizations()
	}
	org, err := l.findOrg(orgRef)
	if err != nil {
		return nil, err
	}
	return []*store.Organization{org}, nil
}

// orgOrOnly is the organization orgRef names, or with "" the only one.
func (l *Local) orgOrOnly(orgRef string) (*store.Organization, error) {
	if orgRef != "" {
		return l.findOrg(orgRef)
	}
	orgs, err := l.DB.ListOrganizations()
	if err != nil {
		return nil, err
	}
	switch len(orgs) {
	case 0:
		return nil, &store.Error{Kind: store.ErrNotFound, Msg: "there is no organization yet: start 'dmarcd serve' once, or create one with 'dmarcd org create NAME'"}
	case 1:
		return orgs[0], nil
	}
	names := make([]string, len(orgs))
	for i, o := range orgs {
		names[i] = o.Name
	}
	return nil, &store.Error{Kind: store.ErrInvalid,
		Msg: fmt.Sprintf("there are %d organizations (%s): choose one with --org", len(orgs), strings.Join(names, ", "))}
}

// domainErr gives the application layer's refusals the store's kinds,
// so that they cross the socket with their reason: a failed verification
// is ErrInvalid saying so, a DNS that could not tell says what that
// means, the rest as asStoreError gives them.
func domainErr(err error) error {
	switch e := app.AsError(err); e.Kind {
	case app.Unverified:
		return &store.Error{Kind: store.ErrInvalid, Msg: "not verified: " + e.Msg}
	case app.DNSUnavailable:
		return fmt.Errorf("DNS lookups failed or timed out, nothing changed; try again later: %w", err)
	}
	return asStoreError(err)
}

type addDomainRequest struct {
	Org  string `json:"org"`
	Name string `json:"name"`
}

func (h *handler) domainRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/domains", func(w http.ResponseWriter, r *http.Request) {
		var in addDomainRequest
		if !h.decode(w, r, &in) {
			return
		}
		d, err := h.svc.AddDomain(r.Context(), in.Org, in.Name)
		if err == nil {
			h.log.Info("domain added", "domain", d.Name, "domain_id", d.ID, "org_id", d.OrganizationID, "via", "admin socket")
		}
		h.answer(w, d, err)
	})
	mux.HandleFunc("GET /v1/domains", func(w http.ResponseWriter, r *http.Request) {
		ds, err := h.svc.ListDomains(r.Context(), r.URL.Query().Get("org"))
		h.answer(w, ds, err)
	})
	mux.HandleFunc("POST /v1/domains/{domain}/verify", func(w http.ResponseWriter, r *http.Request) {
		d, err := h.svc.VerifyDomain(r.Context(), r.URL.Query().Get("org"), r.PathValue("domain"))
		h.answer(w, d, err)
	})
	mux.HandleFunc("DELETE /v1/domains/{domain}", func(w http.ResponseWriter, r *http.Request) {
		d, err := h.svc.DeleteDomain(r.Context(), r.URL.Query().Get("org"), r.PathValue("domain"))
		if err == nil {
			h.log.Info("domain deleted", "domain", d.Name, "domain_id", d.ID, "org_id", d.OrganizationID, "via", "admin socket")
		}
		h.answer(w, d, err)
	})
}

// orgQuery is "?org=orgRef", or "" for none.
func orgQuery(orgRef string) string {
	if orgRef == "" {
		return ""
	}
	return "?" + url.Values{"org": {orgRef}}.Encode()
}

// AddDomain implements Domains.
func (c *Client) AddDomain(ctx context.Context, orgRef, name string) (*AddedDomain, error) {
	var d AddedDomain
	if err := c.do(ctx, "POST", "/v1/domains", addDomainRequest{Org: orgRef, Name: name}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// ListDomains implements Domains.
func (c *Client) ListDomains(ctx context.Context, orgRef string) ([]*DomainEntry, error) {
	var ds []*DomainEntry
	return ds, c.do(ctx, "GET", "/v1/domains"+orgQuery(orgRef), nil, &ds)
}

// VerifyDomain implements Domains.
func (c *Client) VerifyDomain(ctx context.Context, orgRef, domain string) (*DomainEntry, error) {
	var d DomainEntry
	if err := c.do(ctx, "POST", "/v1/domains/"+url.PathEscape(domain)+"/verify"+orgQuery(orgRef), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeleteDomain implements Domains.
func (c *Client) DeleteDomain(ctx context.Context, orgRef, domain string) (*DomainEntry, error) {
	var d DomainEntry
	if err := c.do(ctx, "DELETE", "/v1/domains/"+url.PathEscape(domain)+orgQuery(orgRef), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
