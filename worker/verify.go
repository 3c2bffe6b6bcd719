package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// DefaultVerifyInterval is how often pending and inactive domains are
// verified again.
const DefaultVerifyInterval = 15 * time.Minute

// Verifier checks that a domain publishes its reporting address:
// *dnscheck.Checker. It returns nil when it does, a *dnscheck.VerifyError
// when it does not, and an error wrapping dnscheck.ErrTemporary when the
// DNS could not answer.
type Verifier interface {
	Verify(ctx context.Context, domain, reportingEmail string) error
}

// Reverify is the re-verification job: it verifies every pending and
// inactive domain again, as POST /domains/{id}/verify does, and turns
// those whose DNS is now right active (verified_at set), so that a domain
// owner need not come back to press the button.
type Reverify struct {
	Store   *store.DB
	Checker Verifier
	// Concurrency bounds the verifications in flight; 0 means
	// DefaultDNSConcurrency.
	Concurrency int
	Log         *slog.Logger // nil discards
}

// Run verifies the pending and inactive domains once. It returns an error
// only when the store fails; DNS failures and domains still without their
// address are logged at debug level.
func (v *Reverify) Run(ctx context.Context, now time.Time) error {
	doms, err := v.Store.AllDomains()
	if err != nil {
		return fmt.Errorf("worker: re-verify: %w", err)
	}
	var due []*store.Domain
	for _, d := range doms {
		if d.Status == store.DomainPending || d.Status == store.DomainInactive {
			due = append(due, d)
		}
	}
	return fanOut(ctx, cmpOr(v.Concurrency, DefaultDNSConcurrency), due, func(ctx context.Context, d *store.Domain) error {
		return v.verify(ctx, d, now)
	})
}

func (v *Reverify) log() *slog.Logger {
	if v.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return v.Log
}

func (v *Reverify) verify(ctx context.Context, d *store.Domain, now time.Time) error {
	err := v.Checker.Verify(ctx, d.Name, d.ReportingEmail)
	var ve *dnscheck.VerifyError
	switch {
	case errors.As(err, &ve):
		v.log().Debug("domain not verified yet", "domain", d.Name, "domain_id", d.ID, "reason", ve.Reason)
		return nil
	case err != nil:
		v.log().Debug("re-verification lookup failed", "domain", d.Name, "domain_id", d.ID, "error", err)
		return nil
	}
	at := now.UTC().Truncate(time.Second)
	_, err = v.Store.UpdateDomain(d.OrgID, d.ID, func(cur *store.Domain) error {
		cur.Status, cur.VerifiedAt = store.DomainActive, &at
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("worker: re-verify %s: %w", d.Name, err)
	}
	v.log().Info("domain verified by re-verification", "domain", d.Name, "domain_id", d.ID, "was", string(d.Status))
	return nil
}
