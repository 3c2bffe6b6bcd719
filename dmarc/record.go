package dmarc

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// DMARC policy record (TXT at _dmarc.<domain>) parsing and rendering.
//
// Both generations of the standard are read: RFC 7489 and RFC 9989
// (DMARCbis, which obsoletes it). Tag syntax follows the formal definition
// in RFC 9989 section 4.8; tag meanings and defaults RFC 9989 section 4.7.
//
// The parser is stricter than a Mail Receiver has to be: RFC 9989 section
// 4.7 lets receivers discard bad values in favour of defaults, but dmarcd
// reports them as errors so that a Domain Owner can fix them. Unknown tags
// are ignored with a warning, as section 4.7 requires.

// ErrInvalidRecord is wrapped by every error ParseRecord and ParseTags return.
var ErrInvalidRecord = errors.New("invalid DMARC record")

// RecordError lists what makes a DMARC record invalid. It unwraps to
// ErrInvalidRecord; each problem is a sentence fit for an API client.
type RecordError struct {
	Problems []string
}

// Error joins the problems into one message.
func (e *RecordError) Error() string {
	return "dmarc: invalid DMARC record: " + strings.Join(e.Problems, "; ")
}

// Unwrap returns ErrInvalidRecord.
func (e *RecordError) Unwrap() error { return ErrInvalidRecord }

// Tag is one tag=value pair of a DMARC record as published.
type Tag struct {
	Name  string // lower-case
	Value string // without surrounding whitespace
}

// URI is one entry of a rua or ruf tag.
type URI struct {
	Raw     string // as published, including any size suffix
	Scheme  string // lower-case, e.g. "mailto"
	Address string // for mailto: the addr-spec, percent-decoded; otherwise the URI without size suffix
	Size    string // the RFC 7489 "!10m" size suffix, "" if none
}

// Record is a parsed DMARC policy record with the effective value of each
// policy tag: the published one, or the default of RFC 9989 section 4.7.
type Record struct {
	// Tags are the tags as published, in order, names lower-cased.
	Tags []Tag

	P   string // none, quarantine or reject; "none" when absent (RFC 9989)
	SP  string // defaults to P
	NP  string // defaults to SP (RFC 9989, from RFC 9091)
	PCT int    // defaults to 100 (RFC 7489 only; removed by RFC 9989)

	ADKIM, ASPF string  // "r" or "s"; default "r"
	FO          string  // colon-separated 0, 1, d, s; default "0"
	PSD, T      *string // nil unless published (RFC 9989)

	RUA, RUF []URI

	// Warnings are non-fatal findings, one sentence each.
	Warnings []string
}

// Tag value rules of RFC 9989 section 4.8.
var (
	policyValues = []string{"none", "quarantine", "reject"}
	alignValues  = []string{"r", "s"}
	psdValues    = []string{"y", "n", "u"}
	yornValues   = []string{"y", "n"}
)

// IsDMARCRecord reports whether txt claims to be a DMARC record: its first
// tag is v=DMARC1 (RFC 9989 section 4.10 steps 2 and 6 discard every other
// TXT record). "DMARC1" is case-sensitive, the tag name "v" is not, and
// blanks around "=" are allowed (section 4.8). Leading blanks are tolerated.
func IsDMARCRecord(txt string) bool {
	s := strings.TrimLeft(txt, wsp)
	if s == "" || (s[0] != 'v' && s[0] != 'V') {
		return false
	}
	s = strings.TrimLeft(s[1:], wsp)
	if !strings.HasPrefix(s, "=") {
		return false
	}
	s, ok := strings.CutPrefix(strings.TrimLeft(s[1:], wsp), "DMARC1")
	if !ok {
		return false
	}
	s = strings.TrimLeft(s, wsp)
	return s == "" || s[0] == ';'
}

// wsp is WSP of RFC 5234 (space and horizontal tab).
const wsp = " \t"

// ParseTags splits txt into its tags, in order, without judging their
// values. It returns a *RecordError (wrapping ErrInvalidRecord) for a
// segment with no "=" or a bad tag name, and still returns every tag it
// could read, so a caller can show a broken record tag by tag.
func ParseTags(txt string) ([]Tag, error) {
	tags, problems := splitTags(txt)
	if len(problems) > 0 {
		return tags, &RecordError{Problems: problems}
	}
	return tags, nil
}

func splitTags(txt string) (tags []Tag, problems []string) {
	for seg := range strings.SplitSeq(txt, ";") {
		seg = strings.Trim(seg, wsp)
		if seg == "" {
			continue // empty segments and the optional final ";"
		}
		name, value, ok := strings.Cut(seg, "=")
		name = strings.ToLower(strings.Trim(name, wsp))
		if !ok {
			problems = append(problems, fmt.Sprintf("%q is not a tag=value pair", seg))
			continue
		}
		if !isTagName(name) {
			problems = append(problems, fmt.Sprintf("%q is not a valid tag name", name))
			continue
		}
		tags = append(tags, Tag{Name: name, Value: strings.Trim(value, wsp)})
	}
	return tags, problems
}

// isTagName accepts the tag-name of RFC 6376 section 3.2 (ALPHA then
// letters, digits or "_"), which DMARC's tag syntax is built on.
func isTagName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// ParseRecord parses a DMARC policy record. It returns a *RecordError
// (wrapping ErrInvalidRecord) listing every problem when v=DMARC1 is not the
// first tag, a tag appears twice, the syntax is broken, or p, sp, np, adkim,
// aspf, pct, fo, psd, t, rua or ruf has a bad value.
//
// A missing p is allowed when rua names at least one valid URI: RFC 9989
// sections 4.7 and 4.10.1 then treat the record as p=none. Without p and
// without a usable rua, receivers apply no DMARC processing, so the record
// is reported invalid.
func ParseRecord(txt string) (*Record, error) {
	p := &parser{rec: &Record{PCT: 100, ADKIM: "r", ASPF: "r", FO: "0"}}
	p.rec.Tags, p.problems = splitTags(txt)
	p.checkVersion(txt)
	p.readTags()
	p.fillDefaults()
	if len(p.problems) > 0 {
		return nil, &RecordError{Problems: p.problems}
	}
	return p.rec, nil
}

// parser collects problems and warnings while reading one record.
type parser struct {
	rec      *Record
	problems []string
	seen     map[string]bool
}

func (p *parser) problem(format string, args ...any) {
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
}

func (p *parser) warn(format string, args ...any) {
	p.rec.Warnings = append(p.rec.Warnings, fmt.Sprintf(format, args...))
}

func (p *parser) checkVersion(txt string) {
	tags := p.rec.Tags
	if len(tags) == 0 || tags[0].Name != "v" {
		p.problem("the record must start with v=DMARC1")
		return
	}
	if tags[0].Value != "DMARC1" {
		p.problem("v must be exactly DMARC1 (case-sensitive), not %q", tags[0].Value)
		return
	}
	if !IsDMARCRecord(txt) {
		p.problem("the record must start with v=DMARC1")
		return
	}
	if strings.TrimLeft(txt, wsp) != txt {
		p.warn("the record starts with blanks; strict receivers ignore records that do not begin with v=DMARC1")
	}
}

func (p *parser) readTags() {
	p.seen = make(map[string]bool)
	for i, t := range p.rec.Tags {
		if p.seen[t.Name] {
			p.problem("tag %s appears more than once", t.Name)
			continue
		}
		p.seen[t.Name] = true
		if i == 0 && t.Name == "v" {
			continue
		}
		if !isPrintableValue(t.Value) {
			p.problem("the value of %s has characters outside printable ASCII", t.Name)
			continue
		}
		p.readTag(t)
	}
	if p.seen["p"] && (len(p.rec.Tags) < 2 || p.rec.Tags[1].Name != "p") {
		p.warn("p is not right after v; RFC 7489 section 6.4 puts it there and old receivers may expect it")
	}
}

// isPrintableValue applies dmarc-value of RFC 9989 section 4.8: printing
// ASCII and space, never ";".
func isPrintableValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (p *parser) readTag(t Tag) {
	switch t.Name {
	case "v":
		p.problem("v must be the first tag and appear only once")
	case "p":
		p.rec.P = p.enum(t, policyValues)
	case "sp":
		p.rec.SP = p.enum(t, policyValues)
	case "np":
		p.rec.NP = p.enum(t, policyValues)
	case "adkim":
		p.rec.ADKIM = p.enumOr(t, alignValues, p.rec.ADKIM)
	case "aspf":
		p.rec.ASPF = p.enumOr(t, alignValues, p.rec.ASPF)
	case "psd":
		p.rec.PSD = p.flag(t, psdValues)
	case "t":
		p.rec.T = p.flag(t, yornValues)
	case "pct":
		p.readPct(t)
	case "fo":
		p.readFO(t)
	case "rua":
		p.rec.RUA = p.uriList(t)
	case "ruf":
		p.rec.RUF = p.uriList(t)
	case "rf", "ri":
		// RFC 7489 section 6.3 tags, dropped by RFC 9989 (Appendix C).
		p.warn("%s is removed in RFC 9989 and ignored by its receivers", t.Name)
	default:
		p.warn("unknown tag %s is ignored (RFC 9989 section 4.7)", t.Name)
	}
}

// enum returns the lower-cased value of t when it is one of allowed; the
// ABNF strings of RFC 9989 section 4.8 are case-insensitive (RFC 5234).
func (p *parser) enum(t Tag, allowed []string) string {
	v := strings.ToLower(t.Value)
	if !slices.Contains(allowed, v) {
		p.problem("%s must be one of %s, not %q", t.Name, strings.Join(allowed, ", "), t.Value)
		return ""
	}
	return v
}

func (p *parser) enumOr(t Tag, allowed []string, def string) string {
	if v := p.enum(t, allowed); v != "" {
		return v
	}
	return def
}

func (p *parser) flag(t Tag, allowed []string) *string {
	if v := p.enum(t, allowed); v != "" {
		return &v
	}
	return nil
}

// readPct applies RFC 7489 section 6.3: an integer from 0 to 100.
func (p *parser) readPct(t Tag) {
	n, err := strconv.Atoi(t.Value)
	if err != nil || !isDigits(t.Value) || len(t.Value) > 3 || n > 100 {
		p.problem("pct must be an integer from 0 to 100, not %q", t.Value)
		return
	}
	p.rec.PCT = n
	p.warn("pct is removed in RFC 9989 (use t=y to test a policy); only RFC 7489 receivers honour it")
	if n < 100 {
		p.warn("pct=%d: the policy applies to only %d%% of failing mail", n, n)
	}
}

// readFO accepts the colon-separated list of RFC 7489 section 6.3. RFC 9989
// allows each option once and not 0 with 1; those are only warnings because
// receivers ignore fo syntax errors anyway.
func (p *parser) readFO(t Tag) {
	var opts []string
	for o := range strings.SplitSeq(t.Value, ":") {
		o = strings.ToLower(strings.Trim(o, wsp))
		if o != "0" && o != "1" && o != "d" && o != "s" {
			p.problem("fo must be a colon-separated list of 0, 1, d and s, not %q", t.Value)
			return
		}
		opts = append(opts, o)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(opts)))) != len(opts) {
		p.warn("fo lists an option more than once")
	}
	if slices.Contains(opts, "0") && slices.Contains(opts, "1") {
		p.warn("fo combines 0 and 1, which RFC 9989 does not allow; 1 covers 0")
	}
	p.rec.FO = strings.Join(opts, ":")
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func (p *parser) fillDefaults() {
	r := p.rec
	if !p.seen["p"] {
		if len(r.RUA) == 0 {
			if len(r.Tags) > 0 && r.Tags[0].Name == "v" {
				p.problem("p is missing and rua has no valid URI, so receivers apply no DMARC processing (RFC 9989 section 4.10.1)")
			}
		} else {
			p.warn("p is missing: RFC 9989 receivers treat the record as p=none, RFC 7489 receivers may ignore it")
		}
		r.P = "none"
	}
	if r.P == "none" && p.seen["p"] {
		p.warn("p=none: monitoring only, receivers take no action on failing mail")
	}
	if r.SP == "" {
		r.SP = r.P
	}
	if r.NP == "" {
		r.NP = r.SP
	}
	if r.T != nil && *r.T == "y" {
		p.warn("t=y: test mode, receivers apply a policy one level below the published one")
	}
	if !p.seen["rua"] {
		p.warn("no rua tag: nobody will receive aggregate reports")
	}
	if p.seen["fo"] && !p.seen["ruf"] {
		p.warn("fo has no effect without ruf")
	}
}

// String renders the record as published: its tags in order, "; "-separated.
func (r *Record) String() string {
	return renderTags(r.Tags)
}

func renderTags(tags []Tag) string {
	var b strings.Builder
	for i, t := range tags {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(t.Name)
		b.WriteByte('=')
		b.WriteString(t.Value)
	}
	return b.String()
}

// Get returns the published value of tag (case-insensitive) and whether the
// record has it.
func (r *Record) Get(tag string) (string, bool) {
	tag = strings.ToLower(tag)
	for _, t := range r.Tags {
		if t.Name == tag {
			return t.Value, true
		}
	}
	return "", false
}

// HasReportingAddress reports whether rua holds mailto:addr, comparing
// addresses case-insensitively and ignoring any size suffix.
func (r *Record) HasReportingAddress(addr string) bool {
	return hasMailto(r.RUA, addr)
}

func hasMailto(us []URI, addr string) bool {
	for _, u := range us {
		if u.Scheme == "mailto" && strings.EqualFold(u.Address, addr) {
			return true
		}
	}
	return false
}

// DefaultRecord returns the record dmarcd suggests for a domain that has
// none: monitoring only, aggregate and failure reports to reportingEmail.
func DefaultRecord(reportingEmail string) string {
	m := "mailto:" + reportingEmail
	return "v=DMARC1; p=none; rua=" + m + "; ruf=" + m + "; fo=1"
}

// WithReportingAddress renders r with mailto:addr added to rua and ruf. It
// never weakens the record: every tag stays, in order, with its value; the
// address is appended to an existing rua or ruf, or the tag is added at the
// end, and an address already present is not repeated.
func (r *Record) WithReportingAddress(addr string) string {
	tags := slices.Clone(r.Tags)
	tags = addMailto(tags, "rua", r.RUA, addr)
	tags = addMailto(tags, "ruf", r.RUF, addr)
	return renderTags(tags)
}

func addMailto(tags []Tag, name string, have []URI, addr string) []Tag {
	if hasMailto(have, addr) {
		return tags
	}
	uri := "mailto:" + addr
	for i, t := range tags {
		if t.Name == name {
			if t.Value == "" {
				tags[i].Value = uri
			} else {
				tags[i].Value = t.Value + "," + uri
			}
			return tags
		}
	}
	return append(tags, Tag{Name: name, Value: uri})
}
