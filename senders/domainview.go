package senders

import (
	"context"
	"errors"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
)

// DomainView is the three views of one domain over one window, as the web
// interface's domain page shows them side by side.
type DomainView struct {
	Sources []*Source // most messages first
	Groups  []*Group  // most messages first
	// Advice is nil when the published record could not be read
	// (AdviceError says why).
	Advice      *Advice
	AdviceError string
}

// Domain returns Sources, Senders and PolicyAdvice of a domain over
// from..to from one read of its per-source roll-ups (each of the three
// alone reads them once). Errors as Sources; a DNS lookup of the published
// record that fails leaves Advice nil and says so in AdviceError.
func (v *Views) Domain(ctx context.Context, orgID, domainID string, from, to time.Time) (*DomainView, error) {
	w, err := v.load(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	withDomains(w.sources)
	dv := &DomainView{Sources: w.sources, Groups: v.group(w.domain.Name, w.sources)}
	dv.Advice, err = v.advice(ctx, w, from, to)
	switch {
	case errors.Is(err, dnscheck.ErrTemporary) || errors.Is(err, context.DeadlineExceeded):
		dv.AdviceError = "The published DMARC record of " + w.domain.Name + " could not be read: the DNS did not answer. Reload in a minute."
	case err != nil:
		return nil, err
	}
	return dv, nil
}
