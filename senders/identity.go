package senders

import (
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"

	"github.com/dmarcd/dmarcd/store"
)

// Who sends: each source is named from the evidence the reports carry
// about it over the window (its per-source roll-up), in this order, as the
// commercial DMARC tools do:
//
//  1. a known service (the known-sender map, by base domain) whose domain
//     signed its mail with a DKIM signature that verified (aligned or
//     not), else whose domain passed SPF for it (the MAIL FROM, or HELO,
//     domain), else that its forward-confirmed reverse DNS name is under;
//  2. the domain's own mail: a verified signature or a passing SPF result
//     within the domain's organizational domain (also as the reporters'
//     aligned results say), or an address its SPF record authorizes,
//     named after the network it comes from ("example.com via
//     mx.example.net", "example.com via AS15169 Google LLC") or
//     "example.com (own servers)"; mail passing DKIM alone is "forwarded";
//  3. the base domain of its forward-confirmed reverse DNS name;
//  4. its autonomous system ("AS1221 Telstra Pty Ltd");
//  5. Unidentified.
//
// A failing signature or SPF result is no evidence of who sent (anyone
// can claim a domain), and neither is a reverse DNS name that does not
// resolve back to the address. Of several services, the one with the most
// passing messages names the source.

// identity is who sends from one source, and why. Sources share their
// identities (identifier.intern).
type identity struct {
	key, name, typ string
	sender         *Sender // the known sender, for GroupService
	evidence       string  // EvidenceDKIM ... EvidenceNone
	// detailKind and detail are the fact that named it: DKIM d=sendgrid.net
	// is (EvidenceDKIM, "sendgrid.net").
	detailKind, detail string
}

// ownEvidence is what the source proved of the domain's own mail.
type ownEvidence struct {
	dkim, spf bool
}

// evidenceRank orders the ways of identification, strongest first.
var evidenceRank = map[string]int{EvidenceDKIM: 0, EvidenceSPF: 1, EvidenceRDNS: 2, EvidenceOwnDomain: 3, EvidenceASN: 4, EvidenceNone: 5}

// identifier names the sources of one domain's window, remembering what it
// found of each evidence domain (sources share a handful).
type identifier struct {
	known  *KnownSenders
	domain string // the registered domain
	org    string // its organizational domain
	seen   map[string]domainFacts
	ids    map[[3]string]*identity // by key, detail kind and detail
}

// domainFacts is what an evidence domain says.
type domainFacts struct {
	within bool    // within the domain's organizational domain
	base   string  // its base domain
	sender *Sender // the known service of its base, if any
}

func (v *Views) newIdentifier(domain string) *identifier {
	domain = strings.ToLower(domain)
	org, err := publicsuffix.EffectiveTLDPlusOne(domain)
	if err != nil {
		org = domain
	}
	return &identifier{known: v.Known, domain: domain, org: org, seen: map[string]domainFacts{}, ids: map[[3]string]*identity{}}
}

// facts returns what domain d says (lower case, as the roll-ups keep it).
func (id *identifier) facts(d string) domainFacts {
	if f, ok := id.seen[d]; ok {
		return f
	}
	f := domainFacts{within: d == id.org || strings.HasSuffix(d, "."+id.org)}
	if !f.within {
		f.base = id.known.BaseDomain(d)
		if snd, ok := id.known.Lookup(f.base); ok && snd.IsService() {
			f.sender = &snd
		}
	}
	id.seen[d] = f
	return f
}

// intern returns the identity equal to it that sources already share, or
// it.
func (id *identifier) intern(it identity) *identity {
	k := [3]string{it.key, it.detailKind, it.detail}
	if have := id.ids[k]; have != nil {
		return have
	}
	p := &it
	id.ids[k] = p
	return p
}

// identify names source s from its roll-up r over the window, and says
// what it proved of the domain's own mail; spfAuthorized reports whether
// the domain's SPF record authorizes its address.
func (id *identifier) identify(s *Source, r *store.SourceRollup, spfAuthorized bool) (*identity, ownEvidence) {
	it, own := id.name(s, r, spfAuthorized)
	return id.intern(it), own
}

// name is identify before interning.
func (id *identifier) name(s *Source, r *store.SourceRollup, spfAuthorized bool) (identity, ownEvidence) {
	var svc [2]struct {
		facts domainFacts
		pass  int64
	}
	var own ownEvidence
	for _, e := range r.Evidence {
		if e.Pass <= 0 {
			continue // a failing claim names nobody
		}
		f := id.facts(e.Domain)
		k := 0
		if e.Kind == store.EvidenceSPF {
			k = 1
		}
		switch {
		case f.within && k == 0:
			own.dkim = true
		case f.within:
			own.spf = true
		case f.sender != nil:
			// The service with the most passing messages; ties by name.
			if c := &svc[k]; e.Pass > c.pass || e.Pass == c.pass && c.facts.sender != nil && f.base < c.facts.base {
				c.facts, c.pass = f, e.Pass
			}
		}
	}
	own.dkim = own.dkim || r.DKIMAligned > 0
	own.spf = own.spf || r.SPFAligned > 0
	for k, evidence := range []string{EvidenceDKIM, EvidenceSPF} {
		if f := svc[k].facts; f.sender != nil {
			return identity{key: "s:" + f.sender.Name, name: f.sender.Name, typ: GroupService, sender: f.sender,
				evidence: evidence, detailKind: evidence, detail: f.base}, own
		}
	}
	var base string
	var network *Sender // a known network (access or hosting provider) of the name
	if s.BaseDomain != nil {
		base = *s.BaseDomain
		if snd, ok := id.known.Lookup(base); ok {
			if snd.IsService() {
				return identity{key: "s:" + snd.Name, name: snd.Name, typ: GroupService, sender: &snd,
					evidence: EvidenceRDNS, detailKind: EvidenceRDNS, detail: base}, own
			}
			network = &snd
		}
	}
	if own.dkim || own.spf || spfAuthorized {
		return id.ownIdentity(s, base, own, spfAuthorized), own
	}
	switch {
	case network != nil:
		return identity{key: "s:" + network.Name, name: network.Name, typ: GroupService, sender: network,
			evidence: EvidenceRDNS, detailKind: EvidenceRDNS, detail: base}, own
	case base != "":
		return identity{key: "d:" + base, name: base, typ: GroupDomain, evidence: EvidenceRDNS, detailKind: EvidenceRDNS, detail: base}, own
	case s.ASN != nil:
		as := asName(s)
		return identity{key: "a:" + strconv.FormatUint(uint64(*s.ASN), 10), name: as, typ: GroupAS,
			evidence: EvidenceASN, detailKind: EvidenceASN, detail: "AS" + strconv.FormatUint(uint64(*s.ASN), 10)}, own
	}
	return identity{key: "u:", name: Unidentified, typ: GroupUnknown, evidence: EvidenceNone, detailKind: EvidenceNone}, own
}

// ownIdentity names the domain's own mail after the network it comes
// from: the base domain of its confirmed name (unless that is the domain's
// own), else its AS. Mail that passes DKIM alone is forwarded mail.
func (id *identifier) ownIdentity(s *Source, base string, own ownEvidence, spfAuthorized bool) identity {
	it := identity{typ: GroupOwn, evidence: EvidenceOwnDomain, detail: id.domain}
	switch {
	case own.dkim:
		it.detailKind = EvidenceDKIM
	case own.spf:
		it.detailKind = EvidenceSPF
	default:
		it.detailKind = EvidenceSPFRecord
	}
	forwarded := own.dkim && !own.spf && !spfAuthorized
	key, via := "", ""
	switch {
	case base != "" && base != id.org:
		key, via = "h:"+base, base
	case base != "":
	case s.ASN != nil:
		key, via = "a:"+strconv.FormatUint(uint64(*s.ASN), 10), asName(s)
	}
	switch {
	case forwarded && via != "":
		it.key, it.name = "f:"+key, id.domain+" forwarded via "+via
	case forwarded:
		it.key, it.name = "f:", id.domain+" (forwarded)"
	case via != "":
		it.key, it.name = "o:"+key, id.domain+" via "+via
	default:
		it.key, it.name = "o:", id.domain+" (own servers)"
	}
	return it
}

// asName is "AS1221 Telstra Pty Ltd", or "AS1221" without the AS's name.
func asName(s *Source) string {
	name := "AS" + strconv.FormatUint(uint64(*s.ASN), 10)
	if s.ASOrg != nil && *s.ASOrg != "" {
		name += " " + *s.ASOrg
	}
	return name
}
