package httpapi

import (
	"context"
	"errors"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// The domain operations the admin socket shares with the API ('dmarcd
// domain add' and 'verify'), so that their rules live once.

// AddDomain registers domain name (as typed: validated and normalized as
// POST /domains does) for org and returns it with every DNS record to
// publish, as POST /domains answers.
func (s *Server) AddDomain(ctx context.Context, org *store.Organization, name string) (*store.Domain, []dnscheck.DNSRecord, error) {
	clean, err := domainField("name", &name)
	if err != nil {
		return nil, nil, err
	}
	return s.createDomainNamed(ctx, org, clean)
}

// VerifyDomain looks the DMARC record of domain id of org up, as POST
// /domains/{id}/verify does, and marks the domain active when it lists
// the reporting address. Errors: a *dnscheck.VerifyError naming the
// reason when it does not, ErrTemporary when DNS could not tell, a 404
// *Error for a domain org does not have.
func (s *Server) VerifyDomain(ctx context.Context, org *store.Organization, id string) (*store.Domain, error) {
	d, err := s.store.FindDomain(org.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotFound("domain not found")
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DNSTimeout)
	defer cancel()
	if err := s.dns.Verify(ctx, d.Name, d.ReportingEmail); err != nil {
		return nil, err
	}
	now := s.now()
	d, err = s.store.UpdateDomain(org.ID, d.ID, func(d *store.Domain) error {
		d.Status = store.DomainActive
		d.VerifiedAt = &now
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotFound("domain not found")
	}
	return d, err
}
