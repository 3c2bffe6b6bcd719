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

	"github.com/dmarcd/dmarcd/dnscheck"
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
	// DMARC looks up the published DMARC record of a domain that has had
	// no DNS check yet (a pending domain, one just verified); nil: such a
	// domain publishes none as far as the views know.
	DMARC dnscheck.TXTResolver
	// DNSTimeout bounds that lookup (default 3s).
	DNSTimeout time.Duration

	lookups lookupCache
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
	GroupOwn     = "own"     // the domain's own mail (its DKIM or SPF passes)
	GroupDomain  = "domain"  // the base domain of the sources' names
	GroupAS      = "as"      // the autonomous system of sources without name
	GroupUnknown = "unknown" // no evidence, name or AS: "Unidentified"
)

// Evidence: how a source or group was identified, strongest first (API.md
// "Senders by evidence").
const (
	EvidenceDKIM      = "dkim"       // a verified DKIM signature of a known service's domain
	EvidenceSPF       = "spf"        // a passing SPF (MAIL FROM) result for a known service's domain
	EvidenceRDNS      = "rdns"       // the forward-confirmed reverse DNS name
	EvidenceOwnDomain = "own_domain" // a verified signature or passing SPF within the domain, or its SPF record
	EvidenceASN       = "asn"        // only the autonomous system is known
	EvidenceNone      = "none"       // nothing: Unidentified
)

// Kinds of an EvidenceDetail beyond the Evidence values: the domain's own
// SPF record lists the address.
const EvidenceSPFRecord = "spf_record"

// Unidentified names the group of mail with no evidence, name or AS.
const Unidentified = "Unidentified"

// DomainCount is a domain of a source's DKIM signatures or SPF results:
// the messages that carried it and those on which it passed.
type DomainCount struct {
	Domain   string `json:"domain"`
	Messages int64  `json:"messages"`
	Pass     int64  `json:"pass"`
}

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
	// Group is the name of the sender group of the source.
	Group string `json:"group"`
	// DKIMDomains and SPFDomains are the evidence of the reports: the
	// domains of the source's DKIM signatures and SPF results, most
	// messages first.
	DKIMDomains []DomainCount `json:"dkim_domains"`
	SPFDomains  []DomainCount `json:"spf_domains"`

	category string
	evidence []store.Evidence
	id       *identity // shared by the sources of one name and fact
}

// EvidenceDetail is one fact that named a group, with how many of its
// addresses and messages it named: Kind is EvidenceDKIM ("DKIM
// d=sendgrid.net"), EvidenceSPF, EvidenceRDNS, EvidenceSPFRecord,
// EvidenceASN or EvidenceNone, Value the domain or AS ("AS1221").
type EvidenceDetail struct {
	Kind      string `json:"kind"`
	Value     string `json:"value"`
	SourceIPs int    `json:"source_ips"`
	Messages  int64  `json:"messages"`
}

// String says the detail as people read it: "DKIM d=sendgrid.net, 2
// addresses".
func (d EvidenceDetail) String() string {
	var what string
	switch d.Kind {
	case EvidenceDKIM:
		what = "DKIM d=" + d.Value
	case EvidenceSPF:
		what = "SPF " + d.Value
	case EvidenceRDNS:
		what = "reverse DNS " + d.Value
	case EvidenceSPFRecord:
		what = "in the SPF record of " + d.Value
	case EvidenceASN:
		what = d.Value + " only"
	default:
		what = "no verified DKIM, passing SPF or host name"
	}
	n := strconv.Itoa(d.SourceIPs) + " addresses"
	if d.SourceIPs == 1 {
		n = "1 address"
	}
	return what + ", " + n
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
	// Evidence is how the group was identified (the strongest of its
	// sources' ways): EvidenceDKIM ... EvidenceNone.
	Evidence string `json:"evidence"`
	// EvidenceDetails are the facts behind the name, most addresses first.
	EvidenceDetails []EvidenceDetail `json:"evidence_details"`

	key                                string // groupKey: the same sender in every window
	dmarcPass, spfAligned, dkimAligned int64
	byCategory                         map[string]int64
	auth                               map[authKey]int64
	details                            map[*identity]*EvidenceDetail // interned identities: one per fact
}

// EvidenceText is the group's evidence as people read it: its details,
// most addresses first, the first few of them.
func (g *Group) EvidenceText() string {
	const shown = 3
	var parts []string
	for i, d := range g.EvidenceDetails {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(g.EvidenceDetails)-shown))
			break
		}
		parts = append(parts, d.String())
	}
	return strings.Join(parts, "; ")
}

// Key names the group the same way in every window ("s:" and the
// service, "d:" and the base domain, "a:" and the AS number, "u:"), as
// SenderVolume.Key: what tells a new sender from one seen before.
func (g *Group) Key() string { return g.key }

type authKey struct{ kind, domain, result string }

// window is what the views read of one domain over a window.
type window struct {
	domain  *store.Domain
	sources []*Source          // most messages first
	recent  map[string]*Source // by IP, the last ReadyDays days only
	days    map[time.Time]bool // UTC days with reports
	early   map[string]bool    // IPs with mail before a day (loadWindows' early)
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
	ws, err := v.loadWindows(ctx, orgID, domainID, []Window{{From: from, To: to}}, time.Time{})
	if err != nil {
		return nil, err
	}
	return ws[0], nil
}

// Window is a range of UTC days (both ends truncated to their day, both
// included).
type Window struct{ From, To time.Time }

// loadWindows is load for each window of spans, from one read of the
// roll-ups over the days they span together: each window's sources are
// what load of that window alone has, named from its own mail. Unless
// early is zero, each window's early set has the IPs with mail on a day
// before early's.
func (v *Views) loadWindows(ctx context.Context, orgID, domainID string, spans []Window, early time.Time) ([]*window, error) {
	dom, err := v.DB.FindDomain(orgID, domainID)
	if err != nil {
		return nil, err
	}
	th := v.thresholds()
	type acc struct {
		w                          *window
		fromDay, toDay, recentFrom time.Time
		all, recent                map[string]*store.SourceRollup
	}
	accs := make([]*acc, len(spans))
	lo, hi := spans[0].From, spans[0].To
	for i, sp := range spans {
		to := sp.To.UTC().Truncate(24 * time.Hour)
		accs[i] = &acc{w: &window{domain: dom, recent: map[string]*Source{}, days: map[time.Time]bool{}, from: sp.From, to: sp.To, early: map[string]bool{}},
			fromDay: sp.From.UTC().Truncate(24 * time.Hour), toDay: to, recentFrom: to.AddDate(0, 0, -(th.ReadyDays - 1)),
			all: map[string]*store.SourceRollup{}, recent: map[string]*store.SourceRollup{}}
		if sp.From.Before(lo) {
			lo = sp.From
		}
		if sp.To.After(hi) {
			hi = sp.To
		}
	}
	// Each s is the caller's to keep: the first map to take an IP's row
	// keeps it as is, every other gets a copy.
	merge := func(m map[string]*store.SourceRollup, s *store.SourceRollup, taken bool) bool {
		if g := m[s.SourceIP]; g != nil {
			g.Merge(s)
			return false
		}
		if taken {
			c := *s
			c.Evidence = slices.Clone(s.Evidence)
			s = &c
		}
		m[s.SourceIP] = s
		return !taken
	}
	earlyDay := early.UTC().Truncate(24 * time.Hour)
	err = v.DB.EachSourceDay(orgID, domainID, lo, hi, func(day time.Time, s *store.SourceRollup) {
		taken := false
		for _, a := range accs {
			if day.Before(a.fromDay) || day.After(a.toDay) {
				continue
			}
			a.w.days[day] = true
			if !early.IsZero() && day.Before(earlyDay) {
				a.w.early[s.SourceIP] = true
			}
			taken = merge(a.all, s, taken) || taken
			if !day.Before(a.recentFrom) {
				taken = merge(a.recent, s, taken) || taken
			}
		}
	})
	if err != nil {
		return nil, err
	}
	union := map[string]bool{}
	var ips []string
	for _, a := range accs {
		for ip := range a.all {
			if !union[ip] {
				union[ip] = true
				ips = append(ips, ip)
			}
		}
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
	id := v.newIdentifier(dom.Name)
	out := make([]*window, len(accs))
	for i, a := range accs {
		w := a.w
		for ip, r := range a.all {
			src := v.source(r, names[ip], spf, id)
			w.sources = append(w.sources, src)
			if rr := a.recent[ip]; rr != nil {
				rs := *src
				fill(&rs, rr)
				w.recent[ip] = &rs
			}
		}
		slices.SortFunc(w.sources, func(a, b *Source) int {
			return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.SourceIP, b.SourceIP))
		})
		out[i] = w
	}
	return out, nil
}

// fill sets the counts of s from r.
func fill(s *Source, r *store.SourceRollup) {
	s.Messages, s.DMARCPass, s.SPFAlignedPass, s.DKIMAlignedPass = r.Messages, r.DMARCPass, r.SPFAligned, r.DKIMAligned
	s.Disposition, s.FirstSeen, s.LastSeen = r.Disposition, r.FirstSeen, r.LastSeen
	s.evidence = r.Evidence
}

// source builds a source row: its name, its identity and its category.
func (v *Views) source(r *store.SourceRollup, name store.RDNSEntry, spf *SPFPolicy, id *identifier) *Source {
	s := &Source{SourceIP: r.SourceIP, CountryCode: r.CountryCode, ASN: r.ASN, ASOrg: r.ASOrg}
	fill(s, r)
	if name.Status == store.RDNSConfirmed && name.Hostname != "" {
		h := name.Hostname
		s.Hostname = &h
		if base := v.Known.BaseDomain(h); base != "" {
			s.BaseDomain = &base
		}
	}
	ip, err := netip.ParseAddr(r.SourceIP)
	spfAuthorized := err == nil && spf != nil && spf.Authorizes(ip)
	var own ownEvidence
	s.id, own = id.identify(s, r, spfAuthorized)
	s.Group, s.Sender = s.id.name, s.id.sender
	switch {
	case spfAuthorized || s.id.typ == GroupService && s.Sender.IsService():
		s.category = CategoryAuthorized
	case own.dkim && !own.spf:
		s.category = CategoryForwarder
	case own.dkim || own.spf:
		s.category = CategoryAuthorized
	default:
		s.category = CategoryUnknown
	}
	return s
}

// withDomains sets the DKIMDomains and SPFDomains of the sources from
// their evidence, most messages first.
func withDomains(sources []*Source) {
	for _, s := range sources {
		s.DKIMDomains, s.SPFDomains = []DomainCount{}, []DomainCount{}
		for _, e := range s.evidence {
			c := DomainCount{Domain: e.Domain, Messages: e.Messages, Pass: e.Pass}
			if e.Kind == store.EvidenceDKIM {
				s.DKIMDomains = append(s.DKIMDomains, c)
			} else {
				s.SPFDomains = append(s.SPFDomains, c)
			}
		}
		for _, l := range [][]DomainCount{s.DKIMDomains, s.SPFDomains} {
			slices.SortFunc(l, func(a, b DomainCount) int {
				return cmp.Or(cmp.Compare(b.Messages, a.Messages), cmp.Compare(a.Domain, b.Domain))
			})
		}
	}
}

// Sources returns the domain's sources over from..to, most messages
// first; with group set, only the sources of the sender group of that name
// (none when no group has it).
func (v *Views) Sources(ctx context.Context, orgID, domainID string, from, to time.Time, group string) ([]*Source, error) {
	w, err := v.load(ctx, orgID, domainID, from, to)
	if err != nil {
		return nil, err
	}
	out := w.sources
	if group != "" {
		out = nil
		for _, s := range w.sources {
			if s.Group == group {
				out = append(out, s)
			}
		}
	}
	withDomains(out)
	return out, nil
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

// group groups sources by sender.
func (v *Views) group(domain string, sources []*Source) []*Group {
	th := v.thresholds()
	byKey := map[string]*Group{}
	var out []*Group
	for _, s := range sources {
		id := s.id
		g := byKey[id.key]
		if g == nil {
			g = &Group{Name: id.name, Type: id.typ, key: id.key, Evidence: id.evidence,
				byCategory: map[string]int64{}, auth: map[authKey]int64{}, details: map[*identity]*EvidenceDetail{}}
			if id.sender != nil {
				t := id.sender.Type
				g.ServiceType = &t
			}
			byKey[id.key] = g
			out = append(out, g)
		}
		if evidenceRank[id.evidence] < evidenceRank[g.Evidence] {
			g.Evidence = id.evidence
		}
		d := g.details[id]
		if d == nil {
			d = &EvidenceDetail{Kind: id.detailKind, Value: id.detail}
			g.details[id] = d
		}
		d.SourceIPs++
		d.Messages += s.Messages
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
		g.EvidenceDetails = make([]EvidenceDetail, 0, len(g.details))
		for _, d := range g.details {
			g.EvidenceDetails = append(g.EvidenceDetails, *d)
		}
		slices.SortFunc(g.EvidenceDetails, func(a, b EvidenceDetail) int {
			return cmp.Or(cmp.Compare(b.SourceIPs, a.SourceIPs), cmp.Compare(b.Messages, a.Messages),
				cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Value, b.Value))
		})
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
	switch g.Type {
	case GroupUnknown:
		// No evidence, host name or AS: the hints speak of the sources.
		who, is = "these unidentified sources", "are"
	case GroupOwn:
		who, is = "these servers ("+g.Name+")", "are"
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

// Breakdown is a window's mail by whose it is, as the sender groups'
// categories say: legitimate (authorized senders), forwarded, and
// unidentified (no evidence that it is the domain's: what an enforcing
// policy stops). The three add up to Messages.
type Breakdown struct {
	Messages     int64 `json:"messages"`
	Legitimate   Share `json:"legitimate"`
	Forwarded    Share `json:"forwarded"`
	Unidentified Share `json:"unidentified"`
}

// Share is the mail of the sender groups of one category.
type Share struct {
	Groups    int   `json:"groups"`
	Messages  int64 `json:"messages"`
	DMARCPass int64 `json:"dmarc_pass"`
}

// PassRate is the share's DMARC pass rate, 0 without messages.
func (s Share) PassRate() float64 { return rate(s.DMARCPass, s.Messages) }

// BreakdownOf sums groups (as Senders returns them) by category.
func BreakdownOf(groups []*Group) Breakdown {
	var b Breakdown
	for _, g := range groups {
		s := &b.Unidentified
		switch g.Category {
		case CategoryAuthorized:
			s = &b.Legitimate
		case CategoryForwarder:
			s = &b.Forwarded
		}
		s.Groups++
		s.Messages += g.Messages
		s.DMARCPass += g.dmarcPass
		b.Messages += g.Messages
	}
	return b
}
