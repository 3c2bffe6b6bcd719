package senders

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/publicsuffix"

	"github.com/dmarcd/dmarcd/store"
)

// Thresholds are the settings of the views (API.md's defaults in
// DefaultThresholds).
type Thresholds struct {
	// Passing and Failing are the status bands of a group's DMARC pass
	// rate: passing >= Passing, failing <= Failing, partial in between.
	Passing, Failing float64
	// MinDays and MinMessages are the least data advice needs.
	MinDays     int
	MinMessages int64
	// Ready is the legitimate pass rate enforcement needs over the last
	// ReadyDays days of the window.
	Ready     float64
	ReadyDays int
	// BlockingShare is the share of legitimate mail from which an
	// authorized group under Passing blocks enforcement.
	BlockingShare float64
}

// DefaultThresholds are API.md's.
var DefaultThresholds = Thresholds{Passing: 0.95, Failing: 0.50, MinDays: 7, MinMessages: 100,
	Ready: 0.98, ReadyDays: 14, BlockingShare: 0.01}

// Views computes the three views. Its fields are set once.
type Views struct {
	DB    *store.DB
	Known *KnownSenders
	// SPF evaluates the domains' SPF records; nil counts no IP as
	// SPF-authorized.
	SPF *SPFCache
	// SPFTimeout bounds the DNS work of one view (default 3s); on timeout
	// the view is served without SPF authorization.
	SPFTimeout time.Duration
	Thresholds Thresholds
}

// Categories of a sender group.
const (
	CategoryAuthorized = "authorized"
	CategoryForwarder  = "forwarder"
	CategoryUnknown    = "unknown"
)

// Group types: who names the group.
const (
	GroupService = "service" // a row of the known-sender map
	GroupDomain  = "domain"  // the base domain of the sources' names
	GroupAS      = "as"      // the autonomous system of sources without name
	GroupUnknown = "unknown" // neither name nor AS known
)

// Source is one row of /sources.
type Source struct {
	SourceIP        string                 `json:"source_ip"`
	Hostname        *string                `json:"hostname"`
	BaseDomain      *string                `json:"base_domain"`
	Sender          *Sender                `json:"sender"`
	CountryCode     *string                `json:"country_code"`
	ASN             *uint32                `json:"asn"`
	ASOrg           *string                `json:"as_org"`
	Messages        int64                  `json:"messages"`
	DMARCPass       int64                  `json:"dmarc_pass"`
	SPFAlignedPass  int64                  `json:"spf_aligned_pass"`
	DKIMAlignedPass int64                  `json:"dkim_aligned_pass"`
	Disposition     store.DispositionCount `json:"disposition"`
	FirstSeen       time.Time              `json:"first_seen"`
	LastSeen        time.Time              `json:"last_seen"`

	category string
	evidence []store.Evidence
}

// Group is one sender group of /senders.
type Group struct {
	Name            string   `json:"name"`
	Type            string   `json:"type"`
	ServiceType     *string  `json:"service_type"`
	Category        string   `json:"category"`
	SourceIPs       int      `json:"source_ips"`
	Messages        int64    `json:"messages"`
	DMARCPassRate   float64  `json:"dmarc_pass_rate"`
	SPFAlignedRate  float64  `json:"spf_aligned_rate"`
	DKIMAlignedRate float64  `json:"dkim_aligned_rate"`
	Status          string   `json:"status"`
	Hints           []string `json:"hints"`

	key                                string // groupKey: the same sender in every window
	dmarcPass, spfAligned, dkimAligned int64
	byCategory                         map[string]int64
	auth                               map[authKey]int64
}

type authKey struct{ kind, domain, result string }

// window is what the views read of one domain over a window.
type window struct {
	domain  *store.Domain
	sources []*Source          // most messages first
	recent  map[string]*Source // by IP, the last ReadyDays days only
	days    map[time.Time]bool // UTC days with reports
	from    time.Time
	to      time.Time
}

func (v *Views) thresholds() Thresholds {
	if v.Thresholds == (Thresholds{}) {
		return DefaultThresholds
	}
	return v.Thresholds
}

// load reads the domain's per-source roll-ups over from..to and resolves
// names, senders and SPF authorization. Errors from the store as
// store.EachSourceDay (ErrNotFound for another organization's domain).
func (v *Views) load(ctx context.Context, orgID, domainID string, from, to time.Time) (*window, error) {
	dom, err := v.DB.FindDomain(orgID, domainID)
	if err != nil {
		return nil, err
	}
	th := v.thresholds()
	w := &window{domain: dom, recent: map[string]*Source{}, days: map[time.Time]bool{}, from: from, to: to}
	recentFrom := to.UTC().Truncate(24*time.Hour).AddDate(0, 0, -(th.ReadyDays - 1))
	all := map[string]*store.SourceRollup{}
	recent := map[string]*store.SourceRollup{}
	// Each s is the caller's to keep: the first of an IP is kept as is,
	// and copied only when both maps need it.
	merge := func(m map[string]*store.SourceRollup, s *store.SourceRollup, shared bool) {
		if g := m[s.SourceIP]; g != nil {
			g.Merge(s)
			return
		}
		if shared {
			c := *s
			c.Evidence = slices.Clone(s.Evidence)
			s = &c
		}
		m[s.SourceIP] = s
	}
	err = v.DB.EachSourceDay(orgID, domainID, from, to, func(day time.Time, s *store.SourceRollup) {
		w.days[day] = true
		isRecent := !day.Before(recentFrom)
		merge(all, s, isRecent)
		if isRecent {
			merge(recent, s, false)
		}
	})
	if err != nil {
		return nil, err
	}
	ips := make([]string, 0, len(all))
	for ip := range all {
		ips = append(ips, ip)
	}
	names, err := v.DB.GetRDNS(ips)
	if err != nil {
		return nil, err
	}
	var spf *SPFPolicy
	if v.SPF != nil {
		timeout := cmp.Or(v.SPFTimeout, 3*time.Second)
		sctx, cancel := context.WithTimeout(ctx, timeout)
		spf, _ = v.SPF.Policy(sctx, dom.Name)
		cancel()
	}
	for ip, r := range all {
		src := v.source(r, names[ip], spf)
		w.sources = append(w.sources, src)
		if rr := recent[ip]; rr != nil {
			rs := *src
			fill(&rs, rr)
			w.recent[ip] = &rs
		}
	}
	slices.SortFunc(w.sources, func(a, b *Source) int {
		return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.SourceIP, b.SourceIP))
	})
	return w, nil
}

// fill sets the counts of s from r.
func fill(s *Source, r *store.SourceRollup) {
	s.Messages, s.DMARCPass, s.SPFAlignedPass, s.DKIMAlignedPass = r.Messages, r.DMARCPass, r.SPFAligned, r.DKIMAligned
	s.Disposition, s.FirstSeen, s.LastSeen = r.Disposition, r.FirstSeen, r.LastSeen
	s.evidence = r.Evidence
}

// source builds a source row and decides its category.
func (v *Views) source(r *store.SourceRollup, name store.RDNSEntry, spf *SPFPolicy) *Source {
	s := &Source{SourceIP: r.SourceIP, CountryCode: r.CountryCode, ASN: r.ASN, ASOrg: r.ASOrg}
	fill(s, r)
	if name.Status == store.RDNSConfirmed && name.Hostname != "" {
		h := name.Hostname
		s.Hostname = &h
		if base := v.Known.BaseDomain(h); base != "" {
			s.BaseDomain = &base
			if snd, ok := v.Known.Lookup(base); ok {
				s.Sender = &snd
			}
		}
	}
	ip, err := netip.ParseAddr(r.SourceIP)
	switch {
	case s.Sender != nil && s.Sender.IsService(), err == nil && spf != nil && spf.Authorizes(ip):
		s.category = CategoryAuthorized
	case r.DKIMAligned > 0 && r.SPFAligned == 0:
		s.category = CategoryForwarder
	case r.DKIMAligned > 0:
		s.category = CategoryAuthorized
	default:
		s.category = CategoryUnknown
	}
	return s
}

// Sources returns the domain's sources over from..to, most messages first.
func (v *Views) Sources(ctx context.Context, orgID, domainID string, from, to time.Time) ([]*Source, error) {
	w, err := v.load(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	return w.sources, nil
}

// Senders returns the domain's mail over from..to grouped by sender, most
// messages first.
func (v *Views) Senders(ctx context.Context, orgID, domainID string, from, to time.Time) ([]*Group, error) {
	w, err := v.load(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	return v.group(w.domain.Name, w.sources), nil
}

// groupKey names the group of a source.
func groupKey(s *Source) (key, name, typ string, serviceType *string) {
	switch {
	case s.Sender != nil:
		t := s.Sender.Type
		return "s:" + s.Sender.Name, s.Sender.Name, GroupService, &t
	case s.BaseDomain != nil:
		return "d:" + *s.BaseDomain, *s.BaseDomain, GroupDomain, nil
	case s.ASN != nil:
		name := "AS" + strconv.FormatUint(uint64(*s.ASN), 10)
		if s.ASOrg != nil && *s.ASOrg != "" {
			name += " " + *s.ASOrg
		}
		return "a:" + strconv.FormatUint(uint64(*s.ASN), 10), name, GroupAS, nil
	}
	return "u:", "unknown", GroupUnknown, nil
}

// group groups sources by sender.
func (v *Views) group(domain string, sources []*Source) []*Group {
	th := v.thresholds()
	byKey := map[string]*Group{}
	var out []*Group
	for _, s := range sources {
		key, name, typ, st := groupKey(s)
		g := byKey[key]
		if g == nil {
			g = &Group{Name: name, Type: typ, ServiceType: st, key: key, byCategory: map[string]int64{}, auth: map[authKey]int64{}}
			byKey[key] = g
			out = append(out, g)
		}
		g.SourceIPs++
		g.Messages += s.Messages
		g.dmarcPass += s.DMARCPass
		g.spfAligned += s.SPFAlignedPass
		g.dkimAligned += s.DKIMAlignedPass
		g.byCategory[s.category] += s.Messages
		for _, e := range s.evidence {
			g.auth[authKey{e.Kind, e.Domain, "pass"}] += e.Pass
			g.auth[authKey{e.Kind, e.Domain, "fail"}] += e.Messages - e.Pass
		}
	}
	for _, g := range out {
		g.DMARCPassRate = rate(g.dmarcPass, g.Messages)
		g.SPFAlignedRate = rate(g.spfAligned, g.Messages)
		g.DKIMAlignedRate = rate(g.dkimAligned, g.Messages)
		g.Category = CategoryUnknown
		best := int64(-1)
		for _, c := range []string{CategoryAuthorized, CategoryForwarder, CategoryUnknown} {
			if n := g.byCategory[c]; n > best {
				g.Category, best = c, n
			}
		}
		switch {
		case g.DMARCPassRate >= th.Passing:
			g.Status = "passing"
		case g.DMARCPassRate <= th.Failing:
			g.Status = "failing"
		default:
			g.Status = "partial"
		}
		g.Hints = hints(domain, g, th)
	}
	slices.SortStableFunc(out, func(a, b *Group) int {
		return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// rate is n/total rounded to 4 decimals, 0 without messages.
func rate(n, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return math.Round(float64(n)/float64(total)*10000) / 10000
}

// aligned reports whether d is aligned with domain in relaxed mode (the
// same organizational domain).
func aligned(d, domain string) bool {
	d, domain = strings.ToLower(strings.TrimSuffix(d, ".")), strings.ToLower(domain)
	if d == domain {
		return true
	}
	od, err1 := publicsuffix.EffectiveTLDPlusOne(d)
	odom, err2 := publicsuffix.EffectiveTLDPlusOne(domain)
	return err1 == nil && err2 == nil && od == odom
}

// topAuth returns the domain with the most messages of kind and result,
// aligned or not as asked.
func topAuth(g *Group, domain, kind string, pass, wantAligned bool) string {
	best, bestN := "", int64(0)
	for k, n := range g.auth {
		if k.kind != kind || (k.result == "pass") != pass || aligned(k.domain, domain) != wantAligned {
			continue
		}
		if n > bestN || (n == bestN && k.domain < best) {
			best, bestN = k.domain, n
		}
	}
	return best
}

// capitalize upper-cases the first letter of s (ASCII).
func capitalize(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}

// hints says what to fix for a group, naming the record to change.
func hints(domain string, g *Group, th Thresholds) []string {
	h := []string{}
	if g.DMARCPassRate >= th.Passing && g.Category != CategoryUnknown {
		return h
	}
	who, is := g.Name, "is"
	if g.Type == GroupUnknown {
		// No host name and no AS: the hints speak of the sources.
		who, is = "these sources (no host name or AS known)", "are"
	}
	switch g.Category {
	case CategoryForwarder:
		if g.DKIMAlignedRate < th.Passing {
			h = append(h, fmt.Sprintf("Forwarded mail: SPF cannot pass after forwarding, so it relies on DKIM; %.0f%% is not DKIM-signed for %s, sign all mail for %s with DKIM at its origin.", 100*(1-g.DKIMAlignedRate), domain, domain))
		}
		return h
	case CategoryUnknown:
		h = append(h, fmt.Sprintf("%s %s neither in the SPF record of %s nor signing with DKIM for %s: if this is your mail, add the sender to the SPF record (TXT %s) and set up DKIM for %s there; if not, it is spoofing that an enforcing policy stops.", capitalize(who), is, domain, domain, domain, domain))
		return h
	}
	if g.DKIMAlignedRate < th.Passing {
		if d := topAuth(g, domain, "dkim", true, false); d != "" {
			h = append(h, fmt.Sprintf("DKIM passes for %s but is not aligned: have %s sign with a key for %s (publish its selector._domainkey.%s record).", d, who, domain, domain))
		} else if g.DKIMAlignedRate == 0 {
			h = append(h, fmt.Sprintf("No DKIM signature for %s: turn on DKIM signing at %s and publish its key as a TXT record at <selector>._domainkey.%s.", domain, who, domain))
		} else {
			h = append(h, fmt.Sprintf("DKIM for %s fails on %.0f%% of the mail from %s: check its key record at <selector>._domainkey.%s.", domain, 100*(1-g.DKIMAlignedRate), who, domain))
		}
	}
	if g.SPFAlignedRate < th.Passing {
		if d := topAuth(g, domain, "spf", true, false); d != "" {
			h = append(h, fmt.Sprintf("SPF passes for %s but is not aligned: sign with DKIM for %s, or use an envelope (Return-Path) domain under %s at %s and add it to that domain's SPF record.", d, domain, domain, who))
		} else if d := topAuth(g, domain, "spf", false, true); d != "" {
			h = append(h, fmt.Sprintf("SPF fails for %s: add %s (its include or IPs) to the SPF record (TXT %s).", d, who, d))
		}
	}
	if len(h) == 0 {
		h = append(h, fmt.Sprintf("Only %.0f%% of the mail from %s passes DMARC: check its SPF and DKIM set-up for %s.", 100*g.DMARCPassRate, who, domain))
	}
	return h
}
