package dnscheck

import (
	"context"
	"fmt"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
)

// walkHit is a valid DMARC record found by the tree walk.
type walkHit struct {
	domain string
	txt    string
	rec    *dmarc.Record
}

// Limits of the RFC 9989 section 4.10 shortcut: an Author Domain of
// walkShortcutAt labels or more jumps to its walkShortenTo right-most
// labels, so a walk never takes more than eight queries.
const (
	walkShortcutAt = 8
	walkShortenTo  = 7
)

// walkTargets lists the names the DNS tree walk queries after the Author
// Domain itself, RFC 9989 section 4.10 steps 3, 4 and 7: drop the left-most
// label (or, from eight labels up, drop labels until seven remain), then
// one label at a time down to the top-level domain.
func walkTargets(domain string) []string {
	labels := strings.Split(domain, ".")
	x := len(labels)
	if x >= walkShortcutAt {
		labels = labels[x-walkShortenTo:]
	} else {
		labels = labels[1:]
	}
	var targets []string
	for i := range labels {
		targets = append(targets, strings.Join(labels[i:], "."))
	}
	return targets
}

// treeWalk finds the record that applies to domain when _dmarc.<domain>
// has none, or nil when none does (RFC 9989 section 4.10.1).
//
// The walk collects the single valid DMARC record of each parent and stops
// early at one carrying psd=y or psd=n (section 4.10 step 6). The applicable
// record is the Organizational Domain's, else the Public Suffix Domain's
// (section 4.10.1); the Organizational Domain is chosen as section 4.10.2
// says: the psd=n domain, the domain one label below a psd=y one, or else
// the record with the fewest labels. Parents with several DMARC records or
// an invalid one are skipped, as receivers skip them, with a warning.
func (c *Checker) treeWalk(ctx context.Context, domain string, res *CheckResult) (*walkHit, error) {
	var hits []walkHit
	for _, target := range walkTargets(domain) {
		recs, err := c.dmarcRecords(ctx, target, nil)
		if err != nil {
			return nil, err
		}
		hit, ok := walkRecord(target, recs, res)
		if !ok {
			continue
		}
		hits = append(hits, hit)
		if hit.rec.PSD != nil && (*hit.rec.PSD == "y" || *hit.rec.PSD == "n") {
			break
		}
	}
	return selectPolicy(domain, hits), nil
}

// walkRecord judges the DMARC records found at one walk target.
func walkRecord(target string, recs []string, res *CheckResult) (walkHit, bool) {
	switch len(recs) {
	case 0:
		return walkHit{}, false
	case 1:
	default:
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"%s has %d DMARC records, so the tree walk ignores them", recordName(target), len(recs)))
		return walkHit{}, false
	}
	rec, err := dmarc.ParseRecord(recs[0])
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf(
			"the tree walk skips the invalid DMARC record at %s: %s", recordName(target), strings.Join(problems(err), "; ")))
		return walkHit{}, false
	}
	return walkHit{domain: target, txt: recs[0], rec: rec}, true
}

// selectPolicy picks the applicable record among the hits, which are in
// walk order (longest name first, so a psd=y or psd=n hit is last).
func selectPolicy(domain string, hits []walkHit) *walkHit {
	if len(hits) == 0 {
		return nil
	}
	last := hits[len(hits)-1]
	if last.rec.PSD != nil && *last.rec.PSD == "y" {
		org := oneLabelBelow(domain, last.domain)
		for _, h := range hits {
			if h.domain == org {
				return &h
			}
		}
	}
	// psd=n, psd=y without an Organizational Domain record (the PSD policy
	// applies), or the record at the fewest labels.
	return &last
}

// oneLabelBelow returns the name one label longer than ancestor on the
// path from domain up to it: for a.b.example.com and com, example.com.
func oneLabelBelow(domain, ancestor string) string {
	rest := strings.TrimSuffix(domain, "."+ancestor)
	return rest[strings.LastIndexByte(rest, '.')+1:] + "." + ancestor
}
