package senders

import (
	"context"
	"time"
)

// What the new_sender and policy_ready alerts read of the views: the
// volumes of the sender groups (SenderVolumes) and the advice
// (PolicyAdvice). The decisions are alert.Rules.EvaluateSenders' (package
// alert, sender.go); worker.SenderWatch runs them.

// SenderVolume is the mail of one sender group in a window. Key names the
// group the same way in every window ("s:" and the service name, "o:" and
// "f:" the domain's own and forwarded mail (with "h:" and a base domain or
// "a:" and an AS number after them), "d:" and the base domain, "a:" and
// the AS number, "u:" for Unidentified).
type SenderVolume struct {
	Key      string `json:"key"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Messages int64  `json:"messages"`
	// DMARCPassRate and Hints are the group's, as in /senders.
	DMARCPassRate float64  `json:"dmarc_pass_rate"`
	Hints         []string `json:"hints"`
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
		out[i] = SenderVolume{Key: g.key, Name: g.Name, Type: g.Type, Messages: g.Messages,
			DMARCPassRate: g.DMARCPassRate, Hints: g.Hints}
	}
	return out, nil
}
