package senders

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// The decisions behind the new_sender and policy_ready alerts, as pure
// functions over what the views compute, so that an alert rule is a thin
// call: read the volumes (SenderVolumes) or the advice (PolicyAdvice),
// decide here, raise and deduplicate there.

// SenderVolume is the mail of one sender group in a window. Key names the
// group the same way in every window ("s:" and the service name, "d:" and
// the base domain, "a:" and the AS number, "u:" for no name and no AS).
type SenderVolume struct {
	Key      string `json:"key"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Messages int64  `json:"messages"`
}

// SenderVolumes returns the domain's sender groups over from..to with
// their messages, most first (errors as Senders).
func (v *Views) SenderVolumes(ctx context.Context, orgID, domainID string, from, to time.Time) ([]SenderVolume, error) {
	groups, err := v.Senders(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	out := make([]SenderVolume, len(groups))
	for i, g := range groups {
		out[i] = SenderVolume{Key: g.key, Name: g.Name, Type: g.Type, Messages: g.Messages}
	}
	return out, nil
}

// BaselineDays is how long after its first report a domain's senders are
// its baseline: none of them is new.
const BaselineDays = 7

// NewSenderShare is the least share of the domain's mail in the window
// that makes a new sender worth an alert.
const NewSenderShare = 0.01

// NewSenderCandidates decides the new_sender alerts of a domain for one
// window of mail (current, e.g. the day a report covers): the known
// services and base domains (not AS or unnamed groups) that did not send
// before (their Key is not in before, the groups of the look-back window)
// and carry at least minShare of the window's messages. A domain whose
// first report (firstReport) is less than BaselineDays before windowStart
// is still building its baseline and gets none. Most messages first.
func NewSenderCandidates(firstReport, windowStart time.Time, current []SenderVolume, before map[string]bool, minShare float64) []SenderVolume {
	if firstReport.IsZero() || windowStart.Before(firstReport.AddDate(0, 0, BaselineDays)) {
		return nil
	}
	var total int64
	for _, s := range current {
		total += s.Messages
	}
	var out []SenderVolume
	for _, s := range current {
		if s.Type != GroupService && s.Type != GroupDomain || before[s.Key] || s.Messages <= 0 {
			continue
		}
		if float64(s.Messages) >= minShare*float64(total) {
			out = append(out, s)
		}
	}
	slices.SortStableFunc(out, func(a, b SenderVolume) int {
		return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// StageChanged reports whether going from advice stage old to stage now
// raises policy_ready: now is ready_for_quarantine or ready_for_reject and
// differs from old. An old of "" (never evaluated: a new domain, or the
// first run after an upgrade) is a baseline and raises nothing, so that
// an upgrade does not alert for every domain at once.
func StageChanged(old, now string) bool {
	if old == "" || old == now {
		return false
	}
	return now == StageReadyForQuarantine || now == StageReadyForReject
}
