package arf

import (
	"net/netip"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dmarc/container"
)

// failHeaders is a parsed header block (or the fields of a feedback part):
// names as sent, values unfolded and trimmed, not decoded.
type failHeaders = container.Fields

// failBuild is the adapter from a feedback part's fields, the header of
// the original paired with it, and the report mail to a Report.
func failBuild(f, orig failHeaders, m *failMail) *Report {
	r := &Report{
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
	for _, v := range f.All("Original-Rcpt-To") {
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
	if m != nil {
		r.ReportDate = m.date
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
func failSetOriginal(r *Report, f, orig failHeaders) {
	r.Subject = failText(container.DecodeHeader(orig.Get("Subject")))
	r.MessageID = failMsgID(orig.Get("Message-ID"))
	if r.MessageID == "" {
		r.MessageID = failMsgID(f.Get("Message-ID")) // rspamd copies it into the feedback part
	}
	if len(orig) == 0 {
		return
	}
	// orig belongs to this report alone (see pair): decode it in place.
	for i, h := range orig {
		orig[i] = Header{Name: failText(h.Name), Value: container.DecodeHeader(h.Value)}
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
	if d, err := dmarc.NormalizeDomain(s); err == nil {
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
