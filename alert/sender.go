package alert

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The sender rules: new_sender and policy_ready. They depend on reverse
// DNS (resolved in the background) and on a whole window of mail, so they
// are not run in the ingest commit: a scheduler job (package worker,
// senderwatch.go) computes a domain's sender groups and advice stage with
// package senders, gives them to EvaluateSenders with what the store
// remembers of the domain (SenderState), and stores the alerts and the
// next state in one transaction.

// The alert types of the sender rules.
const (
	// TypeNewSender: a known service or a new base domain started sending
	// as the domain.
	TypeNewSender = "new_sender"
	// TypePolicyReady: the policy advice says the domain can move to a
	// stricter DMARC policy.
	TypePolicyReady = "policy_ready"
)

// Group types of package senders that name who sends: only these can be a
// new sender (an AS or unnamed group names no one to ask).
const (
	SenderGroupService = "service"
	SenderGroupDomain  = "domain"
)

// The advice stages that raise policy_ready (package senders' names).
const (
	StageReadyForQuarantine = "ready_for_quarantine"
	StageReadyForReject     = "ready_for_reject"
)

// senderWindowDays is how many UTC days the current window of new_sender
// spans: today and yesterday, the days the latest daily reports cover.
const senderWindowDays = 2

// SenderGroup is one sender group of a domain over a window, as package
// senders groups mail.
type SenderGroup struct {
	// Key names the group the same way in every window ("s:" and the
	// service, "d:" and the base domain, "a:" and the AS number, "u:").
	Key string
	// Name is who sends (the service, the base domain, the AS).
	Name string
	// Type is SenderGroupService, SenderGroupDomain, or another type
	// ("as", "unknown") that never raises new_sender.
	Type          string
	Messages      int64
	DMARCPassRate float64
	// Hints say what to fix for the group, as /senders words them.
	Hints []string
}

// SenderAdvice is what the sender rules need of the domain's policy
// advice.
type SenderAdvice struct {
	Stage      string
	NextRecord string // "" for none
	Reasons    []string
}

// SenderWatch is what the sender rules see of one domain at one
// evaluation.
type SenderWatch struct {
	DomainID, Domain string
	// FirstReport is the UTC day of the domain's first report (zero when
	// it has none): the BaselineDays from it are the baseline.
	FirstReport time.Time
	// Current are the sender groups of the current window (SenderWindows);
	// Before the keys of the groups of the look-back window before it.
	Current []SenderGroup
	Before  map[string]bool
	// Advice is the domain's advice now.
	Advice SenderAdvice
}

// SenderState is what the sender rules remember of a domain between
// evaluations; the store keeps it. The zero value is a domain never
// evaluated.
type SenderState struct {
	// Stage is the advice stage of the last evaluation ("" for none).
	Stage string `json:"stage"`
	// Announced are the sender keys that raised new_sender (or were new
	// at the first evaluation), with the UTC day they did.
	Announced map[string]uint32 `json:"announced,omitempty"`
	// Ready are the stages that raised policy_ready, with the UTC day.
	Ready map[string]uint32 `json:"ready,omitempty"`
}

// newSenderDetails explain a new_sender alert.
type newSenderDetails struct {
	Sender        string    `json:"sender"`
	SenderType    string    `json:"sender_type"`
	Messages      int64     `json:"messages"`
	TotalMessages int64     `json:"total_messages"`
	Share         float64   `json:"share"`
	Threshold     float64   `json:"threshold"`
	DMARCPassRate float64   `json:"dmarc_pass_rate"`
	WindowFrom    time.Time `json:"window_from"`
	WindowTo      time.Time `json:"window_to"`
	LookbackDays  int       `json:"lookback_days"`
	Hints         []string  `json:"hints"`
}

// policyReadyDetails explain a policy_ready alert.
type policyReadyDetails struct {
	Stage         string   `json:"stage"`
	PreviousStage string   `json:"previous_stage"`
	NextRecord    *string  `json:"next_record"`
	Reasons       []string `json:"reasons"`
}

// SenderWindows returns the windows of new_sender at now, as UTC days
// (both ends included): the current window, today and yesterday, and the
// look-back window of the NewSourceDays before it.
func (r Rules) SenderWindows(now time.Time) (curFrom, curTo, beforeFrom, beforeTo time.Time) {
	curTo = now.UTC().Truncate(24 * time.Hour)
	curFrom = curTo.AddDate(0, 0, -(senderWindowDays - 1))
	beforeTo = curFrom.AddDate(0, 0, -1)
	beforeFrom = curFrom.AddDate(0, 0, -max(r.NewSourceDays, 1))
	return
}

// EvaluateSenders decides the sender alerts of a domain at now and
// returns them with the state to remember in place of old.
//
// new_sender: a group of type service or domain that is not in w.Before,
// was not announced in the look-back window, and has at least
// NewSenderShare of the current window's messages. None while the
// current window starts within BaselineDays of the domain's first report.
//
// policy_ready: the stage became ready_for_quarantine or ready_for_reject
// (it differs from old.Stage), and the same stage did not raise one in the
// PolicyReadyRepeatDays before (a pass rate hovering at the threshold
// does not raise one a day).
//
// The first evaluation of a domain (old.Stage "": a new domain, or the
// first run after an upgrade) raises nothing; it remembers the stage and
// the senders that would be new, so that they do not raise later either.
// Disabled rules raise nothing and still remember.
func (r Rules) EvaluateSenders(w *SenderWatch, old SenderState, now time.Time) ([]Candidate, SenderState) {
	today := Day(now)
	next := SenderState{Stage: w.Advice.Stage, Announced: map[string]uint32{}, Ready: map[string]uint32{}}
	keep := uint32(max(r.NewSourceDays, 1) + senderWindowDays)
	for k, d := range old.Announced {
		if d+keep >= today {
			next.Announced[k] = d
		}
	}
	for s, d := range old.Ready {
		if d+uint32(max(r.PolicyReadyRepeatDays, 1)) > today {
			next.Ready[s] = d
		}
	}
	silent := r.Disabled || old.Stage == ""
	var out []Candidate
	curFrom, curTo, _, _ := r.SenderWindows(now)
	if w.FirstReport.IsZero() || Day(curFrom) < Day(w.FirstReport)+uint32(max(r.BaselineDays, 0)) {
		// The baseline: every sender is learnt from the look-back window.
	} else {
		var total int64
		for _, g := range w.Current {
			total += max(g.Messages, 0)
		}
		groups := slices.Clone(w.Current)
		slices.SortStableFunc(groups, func(a, b SenderGroup) int {
			return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Key, b.Key))
		})
		for _, g := range groups {
			if g.Type != SenderGroupService && g.Type != SenderGroupDomain || g.Messages <= 0 || w.Before[g.Key] {
				continue
			}
			if _, ok := next.Announced[g.Key]; ok {
				continue
			}
			share := float64(g.Messages) / float64(total)
			if share < r.NewSenderShare {
				continue
			}
			next.Announced[g.Key] = today
			if !silent {
				out = append(out, r.newSender(w, &g, total, share, curFrom, curTo, today))
			}
		}
	}
	st := w.Advice.Stage
	if (st == StageReadyForQuarantine || st == StageReadyForReject) && st != old.Stage && old.Stage != "" {
		if _, recent := next.Ready[st]; !recent {
			next.Ready[st] = today
			if !r.Disabled {
				out = append(out, policyReady(w, old.Stage, today))
			}
		}
	}
	if len(next.Announced) == 0 {
		next.Announced = nil
	}
	if len(next.Ready) == 0 {
		next.Ready = nil
	}
	return out, next
}

// newSender is the new_sender alert of group g.
func (r Rules) newSender(w *SenderWatch, g *SenderGroup, total int64, share float64, from, to time.Time, today uint32) Candidate {
	hints := slices.Clone(g.Hints)
	if hints == nil {
		hints = []string{}
	}
	var todo string
	switch {
	case len(hints) > 0:
		todo = strings.Join(hints, " ")
	case g.DMARCPassRate >= 0.95:
		todo = fmt.Sprintf("Its mail passes DMARC, so it is set up with %s's SPF or DKIM records: if you did not set it up, find out who did, and remove it from the records if it should not send as %s.", w.Domain, w.Domain)
	default:
		todo = fmt.Sprintf("If it sends for you, add it to the SPF record (TXT %s) and have it sign with DKIM for %s; if not, it is spoofing that an enforcing DMARC policy stops.", w.Domain, w.Domain)
	}
	days := from.Format(time.DateOnly) + " to " + to.Format(time.DateOnly)
	return Candidate{
		Type: TypeNewSender, Severity: SeverityInfo,
		Title: fmt.Sprintf("%s started sending as %s (%s of its mail)", g.Name, w.Domain, percent(share)),
		Message: fmt.Sprintf("%s sent %d of the %d messages reported for %s from %s (%s), and none in the %d days before; %s of it passed DMARC. %s",
			g.Name, g.Messages, total, w.Domain, days, percent(share), max(r.NewSourceDays, 1), percent(g.DMARCPassRate), todo),
		Details: newSenderDetails{Sender: g.Name, SenderType: g.Type, Messages: g.Messages, TotalMessages: total,
			Share: round4(share), Threshold: r.NewSenderShare, DMARCPassRate: g.DMARCPassRate,
			WindowFrom: from, WindowTo: to.Add(24*time.Hour - time.Second), LookbackDays: max(r.NewSourceDays, 1), Hints: hints},
		Dedup: DedupKey{Day: today, DomainID: w.DomainID, Type: TypeNewSender, Cause: g.Key},
	}
}

// policyReady is the policy_ready alert of the advice in w.
func policyReady(w *SenderWatch, previous string, today uint32) Candidate {
	st := w.Advice.Stage
	policy := "quarantine"
	if st == StageReadyForReject {
		policy = "reject"
	}
	msg := strings.Join(w.Advice.Reasons, " ")
	det := policyReadyDetails{Stage: st, PreviousStage: previous, Reasons: slices.Clone(w.Advice.Reasons)}
	if det.Reasons == nil {
		det.Reasons = []string{}
	}
	if w.Advice.NextRecord != "" {
		rec := w.Advice.NextRecord
		det.NextRecord = &rec
		msg = strings.TrimSpace(msg + " Publish this TXT record at _dmarc." + w.Domain + ": " + strconv.Quote(rec) + ".")
	}
	return Candidate{
		Type: TypePolicyReady, Severity: SeverityInfo,
		Title:   fmt.Sprintf("%s is ready for p=%s", w.Domain, policy),
		Message: msg, Details: det,
		Dedup: DedupKey{Day: today, DomainID: w.DomainID, Type: TypePolicyReady, Cause: st},
	}
}
