package dmarc

import (
	"mime"
	"net/netip"
	"strings"
)

// failHeaders is a parsed header block (or the fields of a feedback part):
// names as sent, values unfolded and trimmed, not decoded.
type failHeaders []Header

// Get returns the value of the first field called name (case-insensitive),
// or "".
func (h failHeaders) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// all returns the values of every field called name, in order.
func (h failHeaders) all(name string) []string {
	var out []string
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

// failParseBlock parses a header block read by failReadBlock, or the body
// of a message/feedback-report part. It reads "Name: value" lines, LF or
// CR LF, leniently: a line starting with white space continues the previous
// field, a line that is not a field is skipped, blank lines are ignored
// (some reporters put one between groups of ARF fields). At most
// failMaxHeaders fields are kept. Names, and values that were not folded,
// are substrings of s.
func failParseBlock(s string) failHeaders {
	var out failHeaders
	valStart, valEnd := -1, -1 // the current field's raw value is s[valStart:valEnd]
	flush := func() {
		if valStart >= 0 {
			out[len(out)-1].Value = failUnfold(s[valStart:valEnd])
		}
		valStart = -1
	}
	for pos := 0; pos < len(s); {
		start := pos
		line, _, found := strings.Cut(s[pos:], "\n")
		pos += len(line)
		if found {
			pos++
		}
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.TrimSpace(line) == "":
		case line[0] == ' ' || line[0] == '\t':
			if valStart >= 0 {
				valEnd = start + len(line)
			}
		default:
			flush()
			name, _, ok := strings.Cut(line, ":")
			name = strings.TrimRight(name, " \t") // "Name : value" appears in the wild
			if !ok || !failFieldName(name) || len(out) >= failMaxHeaders {
				continue // and drop its continuation lines
			}
			if out == nil {
				out = make(failHeaders, 0, 16)
			}
			out = append(out, Header{Name: name})
			valStart, valEnd = start+strings.IndexByte(line, ':')+1, start+len(line)
		}
	}
	flush()
	return out
}

// failUnfold unfolds a raw field value: each line break and the white
// space around it become one space.
func failUnfold(raw string) string {
	if !strings.Contains(raw, "\n") {
		return strings.TrimSpace(raw)
	}
	var b strings.Builder
	b.Grow(len(raw))
	for part := range strings.SplitSeq(raw, "\n") {
		if part = strings.TrimSpace(part); part != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(part)
		}
	}
	return b.String()
}

// failFieldName reports whether b is an RFC 5322 field name: printable
// US-ASCII but the colon, and no space.
func failFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// failDecode decodes RFC 2047 encoded words where it can and makes s valid
// UTF-8 (raw 8-bit header bytes in an unknown charset become U+FFFD).
func failDecode(s string) string {
	if strings.Contains(s, "=?") {
		wd := mime.WordDecoder{CharsetReader: ctrCharsetReader}
		if dec, err := wd.DecodeHeader(s); err == nil {
			s = dec
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// failBuild is the adapter from a feedback part's fields, the header of
// the original paired with it, and the report mail to a FailureReport.
func failBuild(f, orig failHeaders, m *failMail) *FailureReport {
	r := &FailureReport{
		FeedbackType:      failLower(f.Get("Feedback-Type")),
		Version:           failText(f.Get("Version")),
		UserAgent:         failText(f.Get("User-Agent")),
		SourceIP:          failParseIP(f.Get("Source-IP")),
		OriginalMailFrom:  failAddr(f.Get("Original-Mail-From")),
		ReportingMTA:      failMTAHost(f.Get("Reporting-MTA")),
		DeliveryResult:    failLower(f.Get("Delivery-Result")),
		DKIMDomain:        failDomain(f.Get("DKIM-Domain")),
		DKIMSelector:      failText(f.Get("DKIM-Selector")),
		IdentityAlignment: failLower(f.Get("Identity-Alignment")),
	}
	if r.FeedbackType == "" {
		// The part is labelled message/feedback-report and came to a DMARC
		// failure reporting address: what else would it be.
		r.FeedbackType = "auth-failure"
	}
	for _, v := range f.all("Original-Rcpt-To") {
		for a := range strings.SplitSeq(v, ",") {
			if a = failAddr(a); a != "" {
				r.OriginalRcptTo = append(r.OriginalRcptTo, a)
			}
		}
	}
	arrival := f.Get("Arrival-Date")
	if arrival == "" {
		arrival = f.Get("Received-Date") // the name in drafts of RFC 5965
	}
	if t, ok := ParseDate(arrival); ok {
		r.ArrivalDate = t
	}
	r.Reporter = r.ReportingMTA
	if r.Reporter == "" && m != nil {
		r.Reporter = m.fromDomain
	}
	r.ReportedDomain = failDomain(f.Get("Reported-Domain"))
	if r.ReportedDomain == "" {
		r.ReportedDomain = failAddrDomain(orig.Get("From"))
	}
	if r.DKIMDomain == "" && r.DKIMSelector == "" {
		r.DKIMDomain, r.DKIMSelector = failDKIMSignature(orig.Get("DKIM-Signature"))
	}
	r.AuthResults, r.AuthFailure = failAuth(f, orig, r.IdentityAlignment)
	if r.ReportedDomain == "" {
		r.ReportedDomain = failARHeaderFrom(f, orig)
	}
	failSetOriginal(r, f, orig)
	return r
}

// failSetOriginal fills what comes from the original message's header.
func failSetOriginal(r *FailureReport, f, orig failHeaders) {
	r.Subject = failText(failDecode(orig.Get("Subject")))
	r.MessageID = failMsgID(orig.Get("Message-ID"))
	if r.MessageID == "" {
		r.MessageID = failMsgID(f.Get("Message-ID")) // rspamd copies it into the feedback part
	}
	if len(orig) == 0 {
		return
	}
	// orig belongs to this report alone (see pair): decode it in place.
	for i, h := range orig {
		orig[i] = Header{Name: failText(h.Name), Value: failDecode(h.Value)}
	}
	r.Headers = orig
}

func failText(s string) string  { return strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD") }
func failLower(s string) string { return strings.ToLower(failText(s)) }

// failParseIP reads an IP address written plainly, in brackets, with an
// "IPv6:" prefix (RFC 5321) or followed by a comment; IPv4-mapped IPv6 is
// unmapped. The zero Addr when there is none.
func failParseIP(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t(;,"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if len(s) > 5 && strings.EqualFold(s[:5], "ipv6:") {
		s = s[5:]
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap().WithZone("")
}

// failAddr returns the address of a mailbox or path ("Name <a@b>", "<a@b>",
// "a@b"), without angle brackets; "" for the null path "<>".
func failAddr(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '<'); i >= 0 {
		s = s[i+1:]
		if j := strings.IndexByte(s, '>'); j >= 0 {
			s = s[:j]
		}
	}
	return failText(strings.Trim(s, "<> \t"))
}

// failAddrDomain returns the lower-cased domain of the first address in a
// From-style header, or "".
func failAddrDomain(s string) string {
	if !strings.Contains(s, "<") {
		for a := range strings.SplitSeq(s, ",") {
			if strings.Contains(a, "@") {
				s = a
				break
			}
		}
	}
	a := failAddr(s)
	at := strings.LastIndexByte(a, '@')
	if at < 0 {
		return ""
	}
	d := a[at+1:]
	if i := strings.IndexAny(d, " \t()[];,\""); i >= 0 {
		d = d[:i]
	}
	return failDomain(d)
}

// failDomain normalizes a domain as dmarcd stores them (NormalizeDomain);
// what that refuses is kept trimmed and lower-cased.
func failDomain(s string) string {
	s = strings.Trim(strings.TrimSpace(s), "<>")
	if s == "" {
		return ""
	}
	if d, err := NormalizeDomain(s); err == nil {
		return d
	}
	return strings.TrimSuffix(failLower(s), ".")
}

// failMTAHost returns the host of "Reporting-MTA: dns; host" (RFC 3464
// mta-name-type; the type may be left out).
func failMTAHost(s string) string {
	if _, h, ok := strings.Cut(s, ";"); ok {
		s = h
	}
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t("); i >= 0 {
		s = s[:i]
	}
	return failDomain(s)
}

// failMsgID returns a Message-ID without its angle brackets and white
// space (reporters insert some: "<38.E7@ mailrelay.de>").
func failMsgID(s string) string {
	s = strings.Join(strings.Fields(s), "")
	s = strings.TrimPrefix(s, "<")
	if i := strings.IndexByte(s, '>'); i >= 0 {
		s = s[:i]
	}
	return failText(s)
}

// failDKIMSignature returns the d= and s= tags of a DKIM-Signature value.
func failDKIMSignature(v string) (domain, selector string) {
	for tag := range strings.SplitSeq(v, ";") {
		k, val, ok := strings.Cut(tag, "=")
		if !ok {
			continue
		}
		val = strings.Join(strings.Fields(val), "")
		switch strings.TrimSpace(k) {
		case "d":
			domain = failDomain(val)
		case "s":
			selector = failText(val)
		}
	}
	return domain, selector
}
