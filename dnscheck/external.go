package dnscheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/dmarcd/dmarcd/dmarc"
)

// checkExternal verifies the external reporting destinations of rec,
// published by policyDomain, as RFC 7489 section 7.1 has receivers do: for
// a mailto host whose Organizational Domain differs from policyDomain's,
// <policyDomain>._report._dmarc.<host> must hold a v=DMARC1 TXT record.
func (c *Checker) checkExternal(ctx context.Context, res *CheckResult, policyDomain string, rec *dmarc.Record) {
	org := dmarc.OrganizationalDomain(policyDomain)
	byHost := map[string]*bool{}
	seen := map[string]bool{}
	for _, u := range append(append([]dmarc.URI(nil), rec.RUA...), rec.RUF...) {
		host, err := dmarc.NormalizeDomain(u.MailtoHost())
		if err != nil || seen[u.Raw] || dmarc.OrganizationalDomain(host) == org {
			continue // not mailto, already listed, or inside the domain
		}
		seen[u.Raw] = true
		authorized, done := byHost[host]
		if !done {
			authorized = c.authorized(ctx, policyDomain, host)
			byHost[host] = authorized
		}
		res.ExternalAuthorization = append(res.ExternalAuthorization,
			ExternalAuthorization{URI: u.Raw, Host: host, Authorized: authorized})
		if w := authorizationWarning(u.Raw, policyDomain, host, authorized); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
}

func authorizationName(domain, host string) string {
	return domain + "._report._dmarc." + host
}

// authorized reports whether host authorizes reports about domain, or nil
// when the DNS could not tell.
func (c *Checker) authorized(ctx context.Context, domain, host string) *bool {
	txts, err := c.Resolver.LookupTXT(ctx, authorizationName(domain, host))
	yes, no := true, false
	switch {
	case errors.Is(err, ErrNotFound):
		return &no
	case err != nil:
		return nil
	}
	for _, t := range txts {
		if dmarc.IsDMARCRecord(t) {
			return &yes
		}
	}
	return &no
}

func authorizationWarning(uri, domain, host string, authorized *bool) string {
	name := authorizationName(domain, host)
	switch {
	case authorized == nil:
		return fmt.Sprintf("could not check whether %s accepts reports for %s: the lookup of %s failed", host, domain, name)
	case !*authorized:
		return fmt.Sprintf("%s is outside %s and %s has no v=DMARC1 record, so receivers will not send reports there (RFC 7489 section 7.1)",
			uri, domain, name)
	}
	return ""
}
