package senders

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
)

// Stages of the road p=none -> p=quarantine -> p=reject.
const (
	StageNoRecord           = "no_record"
	StageNotEnoughData      = "not_enough_data"
	StageFixSenders         = "fix_senders"
	StageReadyForQuarantine = "ready_for_quarantine"
	StageReadyForReject     = "ready_for_reject"
	StageEnforced           = "enforced"
)

// StageLabel is an advice stage as people read it ("fix senders"): the
// words of the web interface and the mailed digests.
func StageLabel(stage string) string {
	switch stage {
	case StageNoRecord:
		return "no DMARC record"
	case StageNotEnoughData:
		return "collecting data"
	case StageFixSenders:
		return "fix senders"
	case StageReadyForQuarantine:
		return "ready for quarantine"
	case StageReadyForReject:
		return "ready for reject"
	case StageEnforced:
		return "enforced"
	}
	return stage
}

// Published is the policy as published; nil fields are absent tags.
type Published struct {
	P   *string `json:"p"`
	SP  *string `json:"sp"`
	PCT *int    `json:"pct"`
	T   *string `json:"t"`

	tags [][2]string // every tag in order, v first
}

// Advice is the answer of /policy-advice.
type Advice struct {
	Published              *Published `json:"published"`
	Stage                  string     `json:"stage"`
	WindowDays             int        `json:"window_days"`
	Messages               int64      `json:"messages"`
	LegitimateMessages     int64      `json:"legitimate_messages"`
	LegitimatePassRate     float64    `json:"legitimate_pass_rate"`
	UnknownFailingMessages int64      `json:"unknown_failing_messages"`
	BlockingSenders        []*Group   `json:"blocking_senders"`
	NextRecord             *string    `json:"next_record"`
	Reasons                []string   `json:"reasons"`
}

// ParseDMARCTags reads a DMARC record's tags ("v=DMARC1; p=none; ...");
// nil when it is not a DMARC record.
func ParseDMARCTags(record string) *Published {
	p := &Published{}
	for _, part := range strings.Split(record, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, val, ok := strings.Cut(part, "=")
		k, val = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(val)
		// The first tag, not the first part: ";p=none" is no DMARC record.
		if !ok || k == "" || (len(p.tags) == 0 && (k != "v" || !strings.EqualFold(val, "DMARC1"))) {
			return nil
		}
		p.tags = append(p.tags, [2]string{k, val})
		lv := strings.ToLower(val)
		switch k {
		case "p":
			p.P = &lv
		case "sp":
			p.SP = &lv
		case "t":
			p.T = &lv
		case "pct":
			if n, err := strconv.Atoi(val); err == nil {
				p.PCT = &n
			}
		}
	}
	if len(p.tags) == 0 {
		return nil
	}
	return p
}

// testing reports whether the policy is applied in test mode or to part of
// the mail: t=y, or pct under 100.
func (p *Published) testing() bool {
	return (p.T != nil && *p.T == "y") || (p.PCT != nil && *p.PCT < 100)
}

// next returns the record with p set, t=y when ramp, and pct dropped (RFC
// 9989 replaces it with t), every other tag kept in its order.
func (p *Published) next(policy string, ramp bool) string {
	parts := []string{"v=DMARC1", "p=" + policy}
	if ramp {
		parts = append(parts, "t=y")
	}
	for _, kv := range p.tags {
		switch kv[0] {
		case "v", "p", "t", "pct":
			continue
		}
		parts = append(parts, kv[0]+"="+kv[1])
	}
	return strings.Join(parts, "; ")
}

// noRecord is what a DNS check keeps of a name without a DMARC record
// (alert.NoRecord).
const noRecord = alert.NoRecord

// How long a looked-up record is used for a domain that has had no DNS
// check yet: a record found, and none (a person publishing one reloads
// the page to see it).
const (
	publishedTTL = 5 * time.Minute
	noRecordTTL  = time.Minute
)

// lookupCache keeps the records looked up for domains without a DNS check.
type lookupCache struct {
	mu sync.Mutex
	m  map[string]lookupEntry
}

type lookupEntry struct {
	record string // as Domain.LastDNSRecord keeps it
	at     time.Time
}

// published finds the domain's DMARC record as DNS publishes it: as its
// last DNS check saw it, or, for a domain that has had none yet (a
// pending domain, one just verified), as DMARC answers now. Never a
// report's policy_published: reports say what receivers saw, and a
// pending domain's reports are imported ones. nil when there is no record
// or several (none applies, RFC 7489 6.6.3). Errors: the lookup's (they
// wrap dnscheck.ErrTemporary when the DNS could not tell).
func (v *Views) published(ctx context.Context, dom *store.Domain) (*Published, error) {
	rec := dom.LastDNSRecord
	if rec == "" {
		var err error
		if rec, err = v.lookupRecord(ctx, dom.Name); err != nil {
			return nil, err
		}
	}
	if rec == "" || rec == noRecord || strings.Contains(rec, "\n") {
		return nil, nil
	}
	return ParseDMARCTags(rec), nil
}

// ForgetPublished drops the record looked up for domain name, so that the
// next advice looks again: a verification just read the domain's DNS.
func (v *Views) ForgetPublished(name string) {
	v.lookups.mu.Lock()
	delete(v.lookups.m, name)
	v.lookups.mu.Unlock()
}

// lookupRecord returns the DMARC records of name as a DNS check keeps them
// (one per line, or noRecord), from the cache while fresh; "" without a
// resolver.
func (v *Views) lookupRecord(ctx context.Context, name string) (string, error) {
	if v.DMARC == nil {
		return "", nil
	}
	now := time.Now()
	c := &v.lookups
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	if ok && (now.Sub(e.at) < noRecordTTL || e.record != noRecord && now.Sub(e.at) < publishedTTL) {
		return e.record, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(v.DNSTimeout, 3*time.Second))
	defer cancel()
	recs, err := dnscheck.DMARCRecords(ctx, v.DMARC, name)
	if err != nil {
		return "", fmt.Errorf("senders: the published DMARC record of %s: %w", name, err)
	}
	rec := noRecord
	if len(recs) > 0 {
		rec = strings.Join(recs, "\n")
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]lookupEntry{}
	}
	c.m[name] = lookupEntry{record: rec, at: now}
	c.mu.Unlock()
	return rec, nil
}

// PolicyAdvice says where the domain stands on the way to p=reject, from
// its mail over from..to (readiness from the last ReadyDays days of it).
func (v *Views) PolicyAdvice(ctx context.Context, orgID, domainID string, from, to time.Time) (*Advice, error) {
	w, err := v.load(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	return v.advice(ctx, w, from, to)
}

// advice is PolicyAdvice over a loaded window.
func (v *Views) advice(ctx context.Context, w *window, from, to time.Time) (*Advice, error) {
	var err error
	th := v.thresholds()
	a := &Advice{BlockingSenders: []*Group{}, Reasons: []string{},
		WindowDays: int(to.UTC().Truncate(24*time.Hour).Sub(from.UTC().Truncate(24*time.Hour))/(24*time.Hour)) + 1}
	if a.Published, err = v.published(ctx, w.domain); err != nil {
		return nil, err
	}
	for _, s := range w.sources {
		a.Messages += s.Messages
		if s.category == CategoryUnknown {
			a.UnknownFailingMessages += s.Messages - s.DMARCPass
		}
	}
	recent := make([]*Source, 0, len(w.recent))
	var legitPass int64
	for _, s := range w.recent {
		recent = append(recent, s)
		if s.category != CategoryUnknown {
			a.LegitimateMessages += s.Messages
			legitPass += s.DMARCPass
		}
	}
	a.LegitimatePassRate = rate(legitPass, a.LegitimateMessages)
	pub := a.Published
	if pub == nil || pub.P == nil {
		a.Published = nil
		a.Stage = StageNoRecord
		a.Reasons = append(a.Reasons, fmt.Sprintf("%s publishes no DMARC record: publish the suggested one to start receiving reports.", w.domain.Name))
		if w.domain.DMARCRecord != "" {
			r := w.domain.DMARCRecord
			a.NextRecord = &r
		}
		return a, nil
	}
	if len(w.days) < th.MinDays || a.Messages < th.MinMessages {
		a.Stage = StageNotEnoughData
		a.Reasons = append(a.Reasons, fmt.Sprintf("Reports on %d days with %d messages in the window; advice needs %d days and %d messages.",
			len(w.days), a.Messages, th.MinDays, th.MinMessages))
		return a, nil
	}
	if a.LegitimateMessages == 0 {
		a.Stage = StageNotEnoughData
		a.Reasons = append(a.Reasons, fmt.Sprintf("No mail from authorized senders in the last %d days of the window.", th.ReadyDays))
		return a, nil
	}
	p := *pub.P
	if p == "reject" && !pub.testing() {
		a.Stage = StageEnforced
		a.Reasons = append(a.Reasons, "p=reject applies to all mail: the domain is fully protected.")
		return a, nil
	}
	for _, g := range v.group(w.domain.Name, recent) {
		if g.Category == CategoryAuthorized && g.DMARCPassRate < th.Passing &&
			float64(g.Messages) >= th.BlockingShare*float64(a.LegitimateMessages) {
			a.BlockingSenders = append(a.BlockingSenders, g)
		}
	}
	unknownReason := func() {
		if a.UnknownFailingMessages > 0 {
			a.Reasons = append(a.Reasons, fmt.Sprintf("%d failing messages come from senders that show no evidence of being yours (no verified DKIM signature or passing SPF for %s, and no known service): an enforcing policy is what stops them, they do not hold it back.",
				a.UnknownFailingMessages, w.domain.Name))
		}
	}
	if a.LegitimatePassRate < th.Ready || len(a.BlockingSenders) > 0 {
		a.Stage = StageFixSenders
		if a.LegitimatePassRate < th.Ready {
			a.Reasons = append(a.Reasons, fmt.Sprintf("%.1f%% of legitimate mail passed DMARC over the last %d days; enforcement needs %.0f%%.",
				100*a.LegitimatePassRate, th.ReadyDays, 100*th.Ready))
		}
		for _, g := range a.BlockingSenders {
			a.Reasons = append(a.Reasons, fmt.Sprintf("%s sends %d messages and passes DMARC for %.1f%% of them.", g.Name, g.Messages, 100*g.DMARCPassRate))
		}
		unknownReason()
		return a, nil
	}
	var next string
	switch {
	case p == "none":
		a.Stage, next = StageReadyForQuarantine, pub.next("quarantine", true)
		a.Reasons = append(a.Reasons, "Legitimate mail passes: move to p=quarantine in test mode (t=y) first.")
	case p == "quarantine" && pub.testing():
		a.Stage, next = StageReadyForQuarantine, pub.next("quarantine", false)
		a.Reasons = append(a.Reasons, "Legitimate mail passes under p=quarantine in test mode: apply it to all mail.")
	case p == "quarantine":
		a.Stage, next = StageReadyForReject, pub.next("reject", true)
		a.Reasons = append(a.Reasons, "p=quarantine applies to all mail and legitimate mail passes: move to p=reject in test mode (t=y).")
	default: // reject in test mode or on part of the mail
		a.Stage, next = StageReadyForReject, pub.next("reject", false)
		a.Reasons = append(a.Reasons, "Legitimate mail passes under p=reject in test mode: apply it to all mail.")
	}
	unknownReason()
	a.NextRecord = &next
	return a, nil
}
