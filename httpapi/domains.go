package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

func (s *Server) listDomains(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	key := pageKey{org: r.orgID(), page: p.Page, limit: p.Limit}
	version := s.store.DomainsVersion(r.orgID()) // before the read: see DomainsVersion
	if body, ok := s.domainPages.get(key, version); ok {
		writeBody(w, http.StatusOK, body)
		return nil
	}
	domains, total, err := s.store.ListDomains(r.orgID(), store.Page{Page: p.Page, Limit: p.Limit})
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
	d, records, err := s.app.CreateDomain(r.Context(), r.actor, deref(in.Name))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/domains/"+d.ID)
	writeJSON(w, http.StatusCreated, createdDomain{Domain: d, DNSRecords: records})
	return nil
}

func (s *Server) getDomain(w http.ResponseWriter, r *request) error {
	d, err := s.store.FindDomain(r.orgID(), r.params.ByName("id"))
	return writeFound(w, d, err, "domain not found")
}

func (s *Server) deleteDomain(w http.ResponseWriter, r *request) error {
	if err := s.app.DeleteDomain(r.Context(), r.actor, r.params.ByName("id")); err != nil {
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
	d, err := s.app.VerifyDomain(r.Context(), r.actor, r.params.ByName("id"))
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
	res, err := s.app.CheckDMARC(r.Context(), r.actor, deref(in.Domain))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// deref is the string p points to, "" for nil (a field not sent).
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
