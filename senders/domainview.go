package senders

import (
	"context"
	"time"
)

// DomainView is the three views of one domain over one window, as the web
// interface's domain page shows them side by side.
type DomainView struct {
	Sources []*Source // most messages first
	Groups  []*Group  // most messages first
	Advice  *Advice
}

// Domain returns Sources, Senders and PolicyAdvice of a domain over
// from..to from one read of its per-source roll-ups (each of the three
// alone reads them once). Errors as Sources.
func (v *Views) Domain(ctx context.Context, orgID, domainID string, from, to time.Time) (*DomainView, error) {
	w, err := v.load(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	a, err := v.advice(w, from, to)
	if err != nil {
		return nil, err
	}
	return &DomainView{Sources: w.sources, Groups: v.group(w.domain.Name, w.sources), Advice: a}, nil
}
