package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

func (s *Server) listDomains(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	key := pageKey{org: r.org.ID, page: p.Page, limit: p.Limit}
	version := s.store.DomainsVersion(r.org.ID) // before the read: see DomainsVersion
	if body, ok := s.domainPages.get(key, version); ok {
		writeBody(w, http.StatusOK, body)
		return nil
	}
	domains, total, err := s.store.ListDomains(r.org.ID, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	if domains == nil {
		domains = []*store.Domain{}
	}
	body, err := json.Marshal(listBody{Data: domains, Pagination: p.of(total)})
	if err != nil {
		return err
	}
	body = append(body, '\n')
	s.domainPages.put(key, version, body)
	writeBody(w, http.StatusOK, body)
	return nil
}

// createdDomain is the creation response: the domain plus every DNS record
// the customer has to publish.
type createdDomain struct {
	*store.Domain
	DNSRecords []dnscheck.DNSRecord `json:"dns_records"`
}

func (s *Server) createDomain(w http.ResponseWriter, r *request) error {
	var in struct {
		Name *string `json:"name"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	name, err := domainField("name", in.Name)
	if err != nil {
		return err
	}
	d, records, err := s.createDomainNamed(r.Context(), r.org, name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/domains/"+d.ID)
	writeJSON(w, http.StatusCreated, createdDomain{Domain: d, DNSRecords: records})
	return nil
}

// createDomainNamed registers the normalized domain name for org: a new
// reporting address, the suggested record (which never weakens what the
// domain publishes: a DNS that cannot answer is 503 dns_unavailable and
// creates nothing) and the records to publish. The API and the web
// interface (CreateDomain) both create domains through it.
func (s *Server) createDomainNamed(ctx context.Context, org *store.Organization, name string) (*store.Domain, []dnscheck.DNSRecord, error) {
	email := store.NewReportingLocal() + "@" + s.cfg.ReportingDomain
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DNSTimeout)
	defer cancel()
	sug, err := s.dns.SuggestRecord(ctx, name, email)
	if err != nil {
		return nil, nil, err
	}
	d := &store.Domain{
		OrgID:               org.ID,
		Name:                name,
		ReportingEmail:      email,
		DMARCRecord:         sug.Record,
		RegisteredDNSRecord: sug.Published,
	}
	if err := s.store.CreateDomain(d); err != nil {
		return nil, nil, err
	}
	return d, dnscheck.DomainRecords(d.Name, d.DMARCRecord, d.ReportingEmail, s.cfg.ReportingDomain, s.cfg.PublicURL), nil
}

// domainField validates and normalizes a domain name sent in field.
func domainField(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", errValidation(field, "is required")
	}
	name, err := dmarc.NormalizeDomain(*v)
	if err != nil {
		return "", errValidation(field, strings.TrimPrefix(err.Error(), "dmarc: "))
	}
	return name, nil
}

func (s *Server) getDomain(w http.ResponseWriter, r *request) error {
	d, err := s.findDomain(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// findDomain loads the :id domain of the caller's organization; any other
// organization's domain is not found, never forbidden, so ids leak nothing.
func (s *Server) findDomain(r *request) (*store.Domain, error) {
	d, err := s.store.FindDomain(r.org.ID, r.params.ByName("id"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotFound("domain not found")
	}
	return d, err
}

func (s *Server) deleteDomain(w http.ResponseWriter, r *request) error {
	if err := s.store.DeleteDomain(r.org.ID, r.params.ByName("id")); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errNotFound("domain not found")
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type verifiedBody struct {
	Verified bool          `json:"verified"`
	Domain   *store.Domain `json:"domain"`
}

func (s *Server) verifyDomain(w http.ResponseWriter, r *request) error {
	d, err := s.findDomain(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DNSTimeout)
	defer cancel()
	s.senderViews().ForgetPublished(d.Name) // the advice reads DNS afresh, as this does
	if err := s.dns.Verify(ctx, d.Name, d.ReportingEmail); err != nil {
		return err
	}
	now := s.now()
	d, err = s.store.UpdateDomain(r.org.ID, d.ID, func(d *store.Domain) error {
		d.Status = store.DomainActive
		d.VerifiedAt = &now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound("domain not found")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, verifiedBody{Verified: true, Domain: d})
	return nil
}

func (s *Server) checkDMARC(w http.ResponseWriter, r *request) error {
	var in struct {
		Domain *string `json:"domain"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	name, err := domainField("domain", in.Domain)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DNSTimeout)
	defer cancel()
	res, err := s.dns.CheckDMARC(ctx, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
