package senders

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
)

// SPF authorization (RFC 7208). The views ask, for thousands of source IPs
// at once, which of them a domain's published SPF record authorizes. A
// per-message check_host would walk the record's DNS for each IP; instead
// the record is compiled once into its terms with every name resolved
// (include and redirect targets compiled in turn, a and mx turned into
// address prefixes), and an IP is then checked without DNS. Lookups are
// counted in evaluation order, so the 10-lookup and 2-void-lookup limits
// of section 4.6.4 cut the compiled record exactly where check_host would
// stop: an IP matched before that point passes, the rest get permerror.
//
// Two mechanisms depend on the IP beyond its address: "ptr" (which RFC
// 7208 says not to use) and any domain-spec with macros. They are counted
// as lookups but never match: an IP they alone would authorize is not
// counted as authorized.

// SPFResult is an SPF result (RFC 7208 section 2.6).
type SPFResult string

// SPF results.
const (
	SPFNone      SPFResult = "none"
	SPFNeutral   SPFResult = "neutral"
	SPFPass      SPFResult = "pass"
	SPFFail      SPFResult = "fail"
	SPFSoftFail  SPFResult = "softfail"
	SPFTempError SPFResult = "temperror"
	SPFPermError SPFResult = "permerror"
)

// SPF limits of RFC 7208 section 4.6.4.
const (
	spfMaxLookups = 10
	spfMaxVoid    = 2
	spfMaxMXNames = 10
)

// SPFDNS is what SPF evaluation asks the DNS; dnscheck.Resolver has it.
// Errors wrap dnscheck.ErrNotFound or dnscheck.ErrTemporary.
type SPFDNS interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupAddrs(ctx context.Context, host string) ([]netip.Addr, error)
	LookupMX(ctx context.Context, name string) ([]string, error)
}

type termKind byte

const (
	termAll     termKind = iota + 1
	termNets             // ip4, ip6, a, mx: match when an address is in nets
	termInclude          // match when sub passes
	termNever            // ptr, macros: never matches
	termStop             // the evaluation stops here with stop (limits, DNS errors)
)

type spfTerm struct {
	qual SPFResult
	kind termKind
	nets []netip.Prefix
	sub  *SPFPolicy
	stop SPFResult
	why  string
}

// SPFPolicy is a compiled SPF record: check IPs against it with Check.
type SPFPolicy struct {
	// Domain is the domain whose record this is.
	Domain string
	// Record is the SPF record as published, "" when there is none.
	Record string
	// Problem says why the result is permerror or temperror, when it is so
	// for every IP; else "".
	Problem string

	result   SPFResult // set when the whole record evaluates to it
	terms    []spfTerm
	redirect *SPFPolicy
}

// Check returns the SPF result for mail from ip (RFC 7208 check_host, for
// IP-independent records).
func (p *SPFPolicy) Check(ip netip.Addr) SPFResult {
	ip = ip.Unmap()
	if p.result != "" {
		return p.result
	}
	for i := range p.terms {
		t := &p.terms[i]
		switch t.kind {
		case termAll:
			return t.qual
		case termNets:
			for _, n := range t.nets {
				if n.Contains(ip) {
					return t.qual
				}
			}
		case termInclude:
			switch t.sub.Check(ip) {
			case SPFPass:
				return t.qual
			case SPFTempError:
				return SPFTempError
			case SPFPermError, SPFNone:
				return SPFPermError
			}
		case termStop:
			return t.stop
		}
	}
	if p.redirect != nil {
		if r := p.redirect.Check(ip); r != SPFNone {
			return r
		}
		return SPFPermError
	}
	return SPFNeutral
}

// Authorizes reports whether the policy passes mail from ip.
func (p *SPFPolicy) Authorizes(ip netip.Addr) bool { return p.Check(ip) == SPFPass }

// compiler compiles one record and what it references, counting lookups.
type compiler struct {
	ctx     context.Context
	dns     SPFDNS
	lookups int
	void    int
}

// CompileSPF fetches and compiles the SPF record of domain. It returns an
// error only when ctx ends; DNS failures become temperror and permerror
// policies.
func CompileSPF(ctx context.Context, dns SPFDNS, domain string) (*SPFPolicy, error) {
	c := &compiler{ctx: ctx, dns: dns}
	p := c.compile(strings.ToLower(strings.TrimSuffix(domain, ".")), 0)
	return p, ctx.Err()
}

// maxSPFDepth bounds include and redirect nesting; the lookup limit stops
// loops long before.
const maxSPFDepth = 12

func (c *compiler) compile(domain string, depth int) *SPFPolicy {
	p := &SPFPolicy{Domain: domain}
	fail := func(r SPFResult, format string, args ...any) *SPFPolicy {
		p.result, p.Problem = r, fmt.Sprintf(format, args...)
		return p
	}
	if depth > maxSPFDepth {
		return fail(SPFPermError, "includes nested too deep")
	}
	txts, err := c.dns.LookupTXT(c.ctx, domain)
	switch {
	case errors.Is(err, dnscheck.ErrNotFound):
		return fail(SPFNone, "%s publishes no SPF record", domain)
	case err != nil:
		return fail(SPFTempError, "SPF record of %s: %v", domain, err)
	}
	var recs []string
	for _, t := range txts {
		if l := strings.ToLower(t); l == "v=spf1" || strings.HasPrefix(l, "v=spf1 ") {
			recs = append(recs, t)
		}
	}
	switch len(recs) {
	case 0:
		return fail(SPFNone, "%s publishes no SPF record", domain)
	case 1:
		p.Record = recs[0]
	default:
		return fail(SPFPermError, "%s publishes %d SPF records", domain, len(recs))
	}
	var redirect string
	hasRedirect, hasExp, hasAll := false, false, false
	var mechs []string
	for _, f := range strings.Fields(p.Record)[1:] {
		name, value, isMod := strings.Cut(f, "=")
		if isMod && !strings.ContainsAny(name, ":/") {
			if !validModName(name) {
				return fail(SPFPermError, "%s: malformed term %q", domain, f)
			}
			switch strings.ToLower(name) {
			case "redirect":
				if hasRedirect {
					return fail(SPFPermError, "%s: two redirect modifiers", domain)
				}
				hasRedirect, redirect = true, value
			case "exp":
				if hasExp {
					return fail(SPFPermError, "%s: two exp modifiers", domain)
				}
				hasExp = true
			}
			continue // unknown modifiers are ignored (section 6)
		}
		mechs = append(mechs, f)
	}
	// Syntax first: a malformed record is permerror whatever the IP
	// (section 4.6: the whole record is parsed before evaluation).
	parsed := make([]mechanism, 0, len(mechs))
	for _, f := range mechs {
		m, err := parseMechanism(f)
		if err != nil {
			return fail(SPFPermError, "%s: %v", domain, err)
		}
		hasAll = hasAll || m.name == "all"
		parsed = append(parsed, m)
	}
	if hasRedirect && !validDomainSpec(redirect) {
		return fail(SPFPermError, "%s: malformed redirect %q", domain, redirect)
	}
	for _, m := range parsed {
		t := c.term(domain, m, depth)
		p.terms = append(p.terms, t)
		if t.kind == termStop {
			return p
		}
	}
	if hasRedirect && !hasAll {
		if stop, why := c.count(); stop != "" {
			p.terms = append(p.terms, spfTerm{kind: termStop, stop: stop, why: why})
			return p
		}
		if strings.Contains(redirect, "%") {
			return p // IP-dependent target: never matches
		}
		p.redirect = c.compile(strings.ToLower(redirect), depth+1)
	}
	return p
}

// count counts one DNS-querying term; past the limit the evaluation stops.
func (c *compiler) count() (SPFResult, string) {
	c.lookups++
	if c.lookups > spfMaxLookups {
		return SPFPermError, fmt.Sprintf("more than %d DNS lookups", spfMaxLookups)
	}
	return "", ""
}

// voidLookup counts a lookup that found nothing.
func (c *compiler) voidLookup() (SPFResult, string) {
	c.void++
	if c.void > spfMaxVoid {
		return SPFPermError, fmt.Sprintf("more than %d void DNS lookups", spfMaxVoid)
	}
	return "", ""
}

// lookupStop tells whether a term's DNS answer ends the evaluation: a
// temporary failure, or a void lookup (no such name) past the limit. An
// empty result means go on.
func (c *compiler) lookupStop(err error) (SPFResult, string) {
	switch {
	case errors.Is(err, dnscheck.ErrNotFound):
		return c.voidLookup()
	case err != nil:
		return SPFTempError, err.Error()
	}
	return "", ""
}

func (c *compiler) term(domain string, m mechanism, depth int) spfTerm {
	t := spfTerm{qual: m.qual}
	stop := func(r SPFResult, why string) spfTerm { return spfTerm{kind: termStop, stop: r, why: why} }
	target := domain
	if m.domain != "" {
		target = strings.ToLower(m.domain)
	}
	switch m.name {
	case "all":
		t.kind = termAll
		return t
	case "ip4", "ip6":
		t.kind, t.nets = termNets, []netip.Prefix{m.prefix}
		return t
	}
	if r, why := c.count(); r != "" {
		return stop(r, why)
	}
	if m.name == "ptr" || strings.Contains(target, "%") {
		t.kind = termNever
		return t
	}
	switch m.name {
	case "include":
		t.kind, t.sub = termInclude, c.compile(target, depth+1)
		return t
	case "exists":
		_, err := c.dns.LookupAddrs(c.ctx, target)
		if r, why := c.lookupStop(err); r != "" {
			return stop(r, why)
		}
		t.kind = termAll
		if err != nil { // no such name: matches nothing
			t.kind = termNever
		}
		return t
	case "a":
		addrs, err := c.dns.LookupAddrs(c.ctx, target)
		if r, why := c.lookupStop(err); r != "" {
			return stop(r, why)
		}
		t.kind, t.nets = termNets, m.prefixes(addrs)
		return t
	case "mx":
		hosts, err := c.dns.LookupMX(c.ctx, target)
		if r, why := c.lookupStop(err); r != "" {
			return stop(r, why)
		}
		if len(hosts) > spfMaxMXNames {
			return stop(SPFPermError, fmt.Sprintf("mx:%s has more than %d names", target, spfMaxMXNames))
		}
		t.kind = termNets
		for _, h := range hosts {
			addrs, err := c.dns.LookupAddrs(c.ctx, h)
			if err != nil && !errors.Is(err, dnscheck.ErrNotFound) {
				return stop(SPFTempError, err.Error())
			}
			t.nets = append(t.nets, m.prefixes(addrs)...)
		}
		return t
	}
	return stop(SPFPermError, "unknown mechanism "+m.name)
}

// mechanism is one parsed mechanism.
type mechanism struct {
	qual       SPFResult
	name       string
	domain     string
	prefix     netip.Prefix // ip4, ip6
	cidr4      int          // a, mx; -1 when absent
	cidr6      int
	hasDomain  bool
	hasCIDRArg bool
}

func (m mechanism) prefixes(addrs []netip.Addr) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		bits := a.BitLen()
		if a.Is4() && m.cidr4 >= 0 {
			bits = m.cidr4
		} else if a.Is6() && m.cidr6 >= 0 {
			bits = m.cidr6
		}
		if p, err := a.Prefix(bits); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// parseMechanism parses [qualifier] name [":" domain-spec | ":" ip] [cidr]
// (RFC 7208 sections 4.6.1 and 5).
func parseMechanism(f string) (mechanism, error) {
	m := mechanism{qual: SPFPass, cidr4: -1, cidr6: -1}
	switch f[0] {
	case '+':
		f = f[1:]
	case '-':
		m.qual, f = SPFFail, f[1:]
	case '~':
		m.qual, f = SPFSoftFail, f[1:]
	case '?':
		m.qual, f = SPFNeutral, f[1:]
	}
	name, arg, hasArg := strings.Cut(f, ":")
	rest := ""
	if !hasArg {
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name, rest = name[:i], name[i:]
		}
	}
	m.name = strings.ToLower(name)
	bad := func() (mechanism, error) { return mechanism{}, fmt.Errorf("malformed mechanism %q", f) }
	switch m.name {
	case "all":
		if hasArg || rest != "" {
			return bad()
		}
	case "ip4", "ip6":
		if !hasArg {
			return bad()
		}
		addr, bits, hasBits := strings.Cut(arg, "/")
		ip, err := netip.ParseAddr(addr)
		if err != nil || ip.Zone() != "" || (m.name == "ip4") != ip.Is4() {
			return bad()
		}
		n := ip.BitLen()
		if hasBits {
			if n, err = strconv.Atoi(bits); err != nil || n < 0 || n > ip.BitLen() || (len(bits) > 1 && bits[0] == '0') {
				return bad()
			}
		}
		m.prefix, _ = ip.Prefix(n)
	case "a", "mx", "ptr", "include", "exists":
		if hasArg {
			// domain-spec, then dual-cidr for a and mx.
			if m.name == "a" || m.name == "mx" {
				if i := strings.IndexByte(arg, '/'); i >= 0 {
					arg, rest = arg[:i], arg[i:]
				}
			}
			if !validDomainSpec(arg) {
				return bad()
			}
			m.domain, m.hasDomain = arg, true
		} else if m.name == "include" || m.name == "exists" {
			return bad()
		}
		if rest != "" {
			if m.name != "a" && m.name != "mx" {
				return bad()
			}
			if !m.parseDualCIDR(rest) {
				return bad()
			}
		}
	default:
		return mechanism{}, fmt.Errorf("unknown mechanism %q", name)
	}
	return m, nil
}

// parseDualCIDR reads "/n", "//n" or "/n//m".
func (m *mechanism) parseDualCIDR(s string) bool {
	v4, v6, has6 := strings.Cut(s, "//")
	num := func(x string, max int) int {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 || n > max || (len(x) > 1 && x[0] == '0') {
			return -2
		}
		return n
	}
	if v4 != "" {
		if v4[0] != '/' {
			return false
		}
		if m.cidr4 = num(v4[1:], 32); m.cidr4 < 0 {
			return false
		}
	}
	if has6 {
		if m.cidr6 = num(v6, 128); m.cidr6 < 0 {
			return false
		}
	}
	m.hasCIDRArg = true
	return true
}

func validModName(s string) bool {
	if s == "" || !isAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlpha(c) && !(c >= '0' && c <= '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

// validDomainSpec checks a domain-spec loosely: visible characters, a dot
// or a macro, no empty labels outside macros.
func validDomainSpec(s string) bool {
	if s == "" || len(s) > 253*2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	if strings.Contains(s, "%") {
		return true
	}
	s = strings.TrimSuffix(s, ".")
	if !strings.Contains(s, ".") {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
	}
	return true
}

// SPFCache compiles SPF records on demand and keeps them for a while:
// positive answers for ttl, temporary failures for a minute.
type SPFCache struct {
	dns SPFDNS
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]spfCacheEntry
}

type spfCacheEntry struct {
	p       *SPFPolicy
	expires time.Time
}

// NewSPFCache returns a cache asking dns; ttl 0 means an hour.
func NewSPFCache(dns SPFDNS, ttl time.Duration) *SPFCache {
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &SPFCache{dns: dns, ttl: ttl, now: time.Now, entries: map[string]spfCacheEntry{}}
}

// maxSPFCache bounds the cached policies (one per monitored domain).
const maxSPFCache = 10000

// Policy returns the compiled SPF policy of domain, from the cache while
// fresh.
func (c *SPFCache) Policy(ctx context.Context, domain string) (*SPFPolicy, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[domain]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.p, nil
	}
	p, err := CompileSPF(ctx, c.dns, domain)
	if err != nil {
		return nil, err
	}
	ttl := c.ttl
	if p.hasTempError() {
		ttl = time.Minute
	}
	c.mu.Lock()
	if len(c.entries) >= maxSPFCache {
		clear(c.entries)
	}
	c.entries[domain] = spfCacheEntry{p: p, expires: now.Add(ttl)}
	c.mu.Unlock()
	return p, nil
}

func (p *SPFPolicy) hasTempError() bool {
	if p == nil {
		return false
	}
	if p.result == SPFTempError {
		return true
	}
	for _, t := range p.terms {
		if (t.kind == termStop && t.stop == SPFTempError) || (t.sub != nil && t.sub.hasTempError()) {
			return true
		}
	}
	return p.redirect.hasTempError()
}
