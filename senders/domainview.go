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

// PeriodView is what a digest reads of a domain: its sender groups over a
// period, its policy advice over an advice window that ends with the
// period, and which senders sent in the advice window before the period.
type PeriodView struct {
	Groups []*Group // the period's, most messages first
	// Before has the Key of every group of the advice window that had
	// mail on a day before the period began.
	Before map[string]bool
	// Advice is nil when the published record could not be read
	// (AdviceError says why).
	Advice      *Advice
	AdviceError string
}

// Period returns Senders over period and PolicyAdvice over advice (a
// window that holds the period), each as those compute it, and the keys
// of the groups that sent in the advice window before the period, from
// one read of the domain's per-source roll-ups. A source that sent
// before the period counts in Before under the name the advice window's
// mail gives it. Errors as Domain.
func (v *Views) Period(ctx context.Context, orgID, domainID string, period, advice Window) (*PeriodView, error) {
	ws, err := v.loadWindows(ctx, orgID, domainID, []Window{period, advice}, period.From)
	if err != nil {
		return nil, err
	}
	name := ws[0].domain.Name
	pv := &PeriodView{Groups: v.group(name, ws[0].sources), Before: map[string]bool{}}
	for _, s := range ws[1].sources {
		if ws[1].early[s.SourceIP] {
			pv.Before[s.id.key] = true
		}
	}
	pv.Advice, err = v.advice(ctx, ws[1], advice.From, advice.To)
	switch {
	case errors.Is(err, dnscheck.ErrTemporary) || errors.Is(err, context.DeadlineExceeded):
		pv.Advice = nil
		pv.AdviceError = "The published DMARC record of " + name + " could not be read: the DNS did not answer. Reload in a minute."
	case err != nil:
		return nil, err
	}
	return pv, nil
}
