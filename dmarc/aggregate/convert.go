package aggregate

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// Wire structs: the header as the XML spells it, all strings. The streaming
// decoder fills them field by field; the encoding/xml reference of the
// tests decodes into the same structs (hence the tags). aggBuildHeader turns
// them into an Header for both.
type aggWireMeta struct {
	OrgName          string `xml:"org_name"`
	Email            string `xml:"email"`
	ExtraContactInfo string `xml:"extra_contact_info"`
	ReportID         string `xml:"report_id"`
	DateRange        struct {
		Begin string `xml:"begin"`
		End   string `xml:"end"`
	} `xml:"date_range"`
	Errors    []string `xml:"error"`
	Generator string   `xml:"generator"`
}

type aggWirePolicy struct {
	Domain          string `xml:"domain"`
	P               string `xml:"p"`
	SP              string `xml:"sp"`
	NP              string `xml:"np"`
	PCT             string `xml:"pct"`
	ADKIM           string `xml:"adkim"`
	ASPF            string `xml:"aspf"`
	FO              string `xml:"fo"`
	Testing         string `xml:"testing"`
	DiscoveryMethod string `xml:"discovery_method"`
}

// Per-field decisions (shared by the streaming decoder and the reference):
//   - Every value is trimmed of white space (trailing tabs, CR LF, the
//     'example.com ' org_name) and made valid UTF-8 (invalid bytes become
//     U+FFFD) so that it can be stored and served as JSON.
//   - Enumerated values (disposition, results, p/sp/np, adkim/aspf, scope,
//     reason type...) and domains are lower-cased: reporters write `Pass` and
//     `None`, and domains compare case-insensitively. Unknown values
//     (`hardfail`) are kept, lower-cased: dropping them would hide what the
//     reporter said.
//   - report_id and email lose surrounding angle brackets (`<id@host>`).
//   - Missing elements (org_name, envelope_from, an auth_results without
//     <spf>) and empty ones read as "" or nil: RFC 7489 requires some of
//     them, but real reports leave them out, and the rest of the report is
//     still worth having. An empty <reason>, <dkim> or <spf> (every field
//     empty) is dropped: it says nothing.
//   - A record's source_ip must be an IP address (IPv4-mapped IPv6 is
//     unmapped, a zone is dropped) and its count a non-negative integer
//     (0 is fine); otherwise the record is skipped (Reader.Next).
//   - pct that is not an integer reads as absent.
//   - date_range begin/end are Unix seconds ("1538413632.0" is read too); a
//     value that is present but not a time is container.ErrMalformed: a report we
//     cannot place in time would corrupt every statistic it joins.

// aggMaxInterned bounds the strings an interner keeps.
const aggMaxInterned = 4096

// aggInterner hands out one string per distinct short value (domains,
// selectors, enums repeat across records), so that a record costs no
// allocation for them. A nil *aggInterner allocates every time.
type aggInterner struct {
	m       map[string]string
	scratch []byte
	last    [aggNodeCount]string // the last value of each field, checked before the map
}

// textK is text for field k, remembering its last value: consecutive
// records mostly repeat it, and comparing is cheaper than hashing.
func (in *aggInterner) textK(k aggNode, v []byte) string {
	if in == nil {
		return in.text(v)
	}
	v = bytes.TrimSpace(v)
	if string(v) == in.last[k] {
		return in.last[k]
	}
	s := in.text(v)
	in.last[k] = s
	return s
}

// lowerK is lower for field k, remembering its last value (see textK).
func (in *aggInterner) lowerK(k aggNode, v []byte) string {
	if in == nil {
		return in.lower(v)
	}
	v = bytes.TrimSpace(v)
	if string(v) == in.last[k] {
		return in.last[k]
	}
	s := in.lower(v)
	in.last[k] = s
	return s
}

func (in *aggInterner) str(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(in.m) < aggMaxInterned && len(b) <= 255 {
		if in.m == nil {
			in.m = make(map[string]string)
		}
		in.m[s] = s
	}
	return s
}

// text returns v trimmed, as valid UTF-8.
func (in *aggInterner) text(v []byte) string {
	v = bytes.TrimSpace(v)
	if !utf8.Valid(v) {
		return strings.ToValidUTF8(string(v), "\uFFFD")
	}
	return in.str(v)
}

// lower returns v trimmed and lower-cased, as valid UTF-8.
func (in *aggInterner) lower(v []byte) string {
	v = bytes.TrimSpace(v)
	upper := false
	for _, c := range v {
		if c >= utf8.RuneSelf {
			return strings.ToLower(strings.ToValidUTF8(string(v), "\uFFFD"))
		}
		upper = upper || 'A' <= c && c <= 'Z'
	}
	if !upper {
		return in.str(v)
	}
	var buf []byte
	if in != nil {
		buf = in.scratch[:0]
	}
	for _, c := range v {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	if in != nil {
		in.scratch = buf
	}
	return in.str(buf)
}

// aggUnbracket removes one pair of surrounding angle brackets.
func aggUnbracket(s string) string {
	if len(s) >= 2 && s[0] == '<' && s[len(s)-1] == '>' {
		return strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// aggIP reads a source_ip.
func aggIP(v []byte) (netip.Addr, bool) {
	v = bytes.TrimSpace(v)
	if a, ok := aggIPv4(v); ok {
		return a, true
	}
	if len(v) == 0 || len(v) > 100 {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(string(v))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// aggIPv4 parses a plain dotted quad without allocating. It accepts a
// subset of what netip.ParseAddr accepts (no leading zeros), and says no to
// anything else, which then goes to netip.ParseAddr.
func aggIPv4(v []byte) (netip.Addr, bool) {
	var ip [4]byte
	field, digits, n := 0, 0, 0
	for i, c := range v {
		switch {
		case '0' <= c && c <= '9':
			if digits > 0 && n == 0 {
				return netip.Addr{}, false // leading zero
			}
			n = n*10 + int(c-'0')
			digits++
			if n > 255 {
				return netip.Addr{}, false
			}
		case c == '.' && digits > 0 && field < 3 && i+1 < len(v):
			ip[field] = byte(n)
			field, digits, n = field+1, 0, 0
		default:
			return netip.Addr{}, false
		}
	}
	if field != 3 || digits == 0 {
		return netip.Addr{}, false
	}
	ip[3] = byte(n)
	return netip.AddrFrom4(ip), true
}

// aggParseCount reads a row/count: a non-negative integer.
func aggParseCount(v []byte) (int64, bool) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && len(v) <= 18 {
		var n int64
		for _, c := range v {
			if c < '0' || c > '9' {
				goto slow
			}
			n = n*10 + int64(c-'0')
		}
		return n, true
	}
slow:
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil && n >= 0
}

// aggMaxUnix is 9999-12-31T23:59:59Z: later times cannot be written as
// RFC 3339, which the API serves.
const aggMaxUnix = 253402300799

// aggUnix reads a date_range bound; "" is the zero time.
func aggUnix(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	whole := s
	if i := strings.IndexByte(s, '.'); i > 0 && strings.Trim(s[i+1:], "0123456789") == "" {
		whole = s[:i]
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || n < 0 || n > aggMaxUnix {
		return time.Time{}, fmt.Errorf("not a Unix time: %q", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// aggParsePct reads policy_published/pct: nil when absent or not an integer.
func aggParsePct(s string) *int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return nil
	}
	return &n
}

// aggBuildHeader converts the wire header. Errors: container.ErrMalformed for a
// date_range bound that is present but not a Unix time.
func aggBuildHeader(version, namespace string, m *aggWireMeta, p *aggWirePolicy) (*Header, error) {
	var in *aggInterner
	text := func(s string) string { return in.text([]byte(s)) }
	lower := func(s string) string { return in.lower([]byte(s)) }
	h := &Header{
		Version:          text(version),
		Namespace:        strings.ToValidUTF8(namespace, "\uFFFD"),
		OrgName:          text(m.OrgName),
		Email:            aggUnbracket(text(m.Email)),
		ExtraContactInfo: text(m.ExtraContactInfo),
		ReportID:         aggUnbracket(text(m.ReportID)),
		Generator:        text(m.Generator),
		Policy: PolicyPublished{
			Domain:          lower(p.Domain),
			P:               lower(p.P),
			SP:              lower(p.SP),
			NP:              lower(p.NP),
			PCT:             aggParsePct(p.PCT),
			ADKIM:           lower(p.ADKIM),
			ASPF:            lower(p.ASPF),
			FO:              lower(p.FO),
			Testing:         lower(p.Testing),
			DiscoveryMethod: lower(p.DiscoveryMethod),
		},
	}
	for _, e := range m.Errors[:min(len(m.Errors), aggMaxRepeat)] {
		if e = text(e); e != "" {
			h.Errors = append(h.Errors, e)
		}
	}
	var err error
	if h.DateBegin, err = aggUnix(m.DateRange.Begin); err != nil {
		return nil, fmt.Errorf("dmarc: report_metadata/date_range/begin: %w: %w", container.ErrMalformed, err)
	}
	if h.DateEnd, err = aggUnix(m.DateRange.End); err != nil {
		return nil, fmt.Errorf("dmarc: report_metadata/date_range/end: %w: %w", container.ErrMalformed, err)
	}
	if !h.DateBegin.IsZero() && !h.DateEnd.IsZero() && h.DateEnd.Before(h.DateBegin) {
		return nil, fmt.Errorf("dmarc: report_metadata/date_range: %w: it ends (%s) before it begins (%s)",
			container.ErrMalformed, h.DateEnd.UTC().Format(time.RFC3339), h.DateBegin.UTC().Format(time.RFC3339))
	}
	return h, nil
}

// aggRecordBuilder assembles one record from its leaves.
type aggRecordBuilder struct {
	r       Record
	ipOK    bool
	countOK bool
	rawIP   []byte // the source_ip as written, for the skip warning
	reasons []PolicyReason
	dkim    []DKIMResult
	spf     []SPFResult

	slabRec    aggSlab[Record]
	slabReason aggSlab[PolicyReason]
	slabDKIM   aggSlab[DKIMResult]
	slabSPF    aggSlab[SPFResult]
}

func (b *aggRecordBuilder) reset() {
	b.r = Record{}
	b.ipOK, b.countOK = false, false
	b.rawIP = b.rawIP[:0]
	b.reasons, b.dkim, b.spf = b.reasons[:0], b.dkim[:0], b.spf[:0]
}

// set converts the value of leaf k into the record.
func (b *aggRecordBuilder) set(k aggNode, v []byte, in *aggInterner) {
	switch k {
	case aggSourceIP:
		b.r.SourceIP, b.ipOK = aggIP(v)
		b.rawIP = append(b.rawIP[:0], v[:min(len(v), 64)]...)
	case aggCount:
		b.r.Count, b.countOK = aggParseCount(v)
	case aggDisposition:
		b.r.Disposition = in.lowerK(k, v)
	case aggEvalDKIM:
		b.r.DKIM = in.lowerK(k, v)
	case aggEvalSPF:
		b.r.SPF = in.lowerK(k, v)
	case aggHeaderFrom:
		b.r.HeaderFrom = in.lowerK(k, v)
	case aggEnvFrom:
		b.r.EnvelopeFrom = in.lowerK(k, v)
	case aggEnvTo:
		b.r.EnvelopeTo = in.lowerK(k, v)
	case aggReasonType, aggReasonComment:
		r := &b.reasons[len(b.reasons)-1]
		if k == aggReasonType {
			r.Type = in.lowerK(k, v)
		} else {
			r.Comment = in.textK(k, v)
		}
	case aggDKIMDomain, aggDKIMSelector, aggDKIMResult, aggDKIMHuman:
		b.setDKIM(&b.dkim[len(b.dkim)-1], k, v, in)
	case aggSPFDomain, aggSPFScope, aggSPFResult, aggSPFHuman:
		b.setSPF(&b.spf[len(b.spf)-1], k, v, in)
	}
}

func (b *aggRecordBuilder) setDKIM(r *DKIMResult, k aggNode, v []byte, in *aggInterner) {
	switch k {
	case aggDKIMDomain:
		r.Domain = in.lowerK(k, v)
	case aggDKIMSelector:
		r.Selector = in.textK(k, v)
	case aggDKIMResult:
		r.Result = in.lowerK(k, v)
	case aggDKIMHuman:
		r.HumanResult = in.textK(k, v)
	}
}

func (b *aggRecordBuilder) setSPF(r *SPFResult, k aggNode, v []byte, in *aggInterner) {
	switch k {
	case aggSPFDomain:
		r.Domain = in.lowerK(k, v)
	case aggSPFScope:
		r.Scope = in.lowerK(k, v)
	case aggSPFResult:
		r.Result = in.lowerK(k, v)
	case aggSPFHuman:
		r.HumanResult = in.textK(k, v)
	}
}

// finish returns the record, or nil and why it must be skipped.
func (b *aggRecordBuilder) finish() (*Record, string) {
	if !b.ipOK {
		return nil, fmt.Sprintf("source_ip %q is not an IP address", strings.ToValidUTF8(string(bytes.TrimSpace(b.rawIP)), "\uFFFD"))
	}
	if !b.countOK {
		return nil, "count is not a non-negative integer"
	}
	r := b.slabRec.take(1)
	r[0] = b.r
	r[0].Reasons = aggKeep(&b.slabReason, b.reasons)
	r[0].DKIMResults = aggKeep(&b.slabDKIM, b.dkim)
	r[0].SPFResults = aggKeep(&b.slabSPF, b.spf)
	return &r[0], ""
}

// aggSlabLen is how many values one slab allocation serves at most.
// Records and their results are carved out of slabs: a few large
// allocations instead of four small ones per record. Slabs start small
// (most reports have a handful of records) and double up to aggSlabLen.
// A slab lives as long as any record carved from it; that is at most
// aggSlabLen records' worth of memory held.
const aggSlabLen = 64

// aggSlab is a supply of zero values.
type aggSlab[T any] struct {
	free []T
	size int // of the last allocation
}

// take returns n zero values, with capacity n so that a caller's append
// cannot spill into a neighbour.
func (sl *aggSlab[T]) take(n int) []T {
	if n > aggSlabLen {
		return make([]T, n)
	}
	if len(sl.free) < n {
		sl.size = min(aggSlabLen, max(2*sl.size, 4, n))
		sl.free = make([]T, sl.size)
	}
	s := sl.free[:n:n]
	sl.free = sl.free[n:]
	return s
}

// aggKeep copies the non-empty elements of s (an empty <reason/>, <dkim/>
// or <spf/> says nothing) into a slice from slab, or returns nil.
func aggKeep[T comparable](slab *aggSlab[T], s []T) []T {
	var zero T
	n := 0
	for _, v := range s {
		if v != zero {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := slab.take(n)[:0]
	for _, v := range s {
		if v != zero {
			out = append(out, v)
		}
	}
	return out
}
