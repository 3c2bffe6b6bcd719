package arf

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// ErrNotFailureReport means a mail holds feedback reports (RFC 5965), but
// none about authentication: Feedback-Type abuse, fraud, virus... The error
// that wraps it names the type found.
var ErrNotFailureReport = errors.New("not a DMARC failure report")

// Header is one header field of the original message of a failure report,
// unfolded, with RFC 2047 encoded words decoded where possible.
type Header = container.Field

// Report is one DMARC failure (forensic, RUF) report: an RFC 6591
// authentication failure report (an ARF message/feedback-report part) with
// the headers of the message it is about. The body of that message is never
// kept. Strings are trimmed and hold valid UTF-8; fields the report leaves
// out are "" (or nil, the zero IP, the zero time).
type Report struct {
	FeedbackType string // "auth-failure" (lower-cased)
	Version      string // ARF Version as sent: "1", "1.0"...
	UserAgent    string

	SourceIP         netip.Addr // invalid (zero) when absent or unparseable; IPv4-mapped addresses unmapped
	OriginalMailFrom string     // without <>; "" when empty or absent
	OriginalRcptTo   []string   // without <>
	ArrivalDate      time.Time  // UTC; zero when absent or unparseable (see ReportDate)
	// ReportDate is the Date of the report mail (of the report mail
	// forwarded inside another, for a report found there), UTC; zero when
	// absent or unparseable. Reporters that leave Arrival-Date out
	// (OpenDMARC, the DMARCbis example) send the report as the message
	// arrives: it stands in for the arrival date, and tells a report sent
	// again from another report about the same message.
	ReportDate time.Time

	ReportingMTA   string // host of "Reporting-MTA: dns; host", lower-cased
	Reporter       string // ReportingMTA, else the domain of the report mail's From
	ReportedDomain string // Reported-Domain, else the original From header's domain, else a dmarc result's header.from; lower-cased, IDNs in A-labels

	// AuthFailure holds the lower-cased Auth-Failure values (dmarc, spf,
	// dkim, adsp, bodyhash, revoked, signature, or others as sent),
	// deduplicated, in order. When the report has no Auth-Failure field it
	// is derived (see failDeriveAuthFailure): "dmarc" unless the results say
	// DMARC passed, then "spf" and "dkim" when their results failed or
	// Identity-Alignment leaves them out.
	AuthFailure    []string
	DeliveryResult string // lower-cased as sent (also values outside RFC 6591's list, e.g. smg-policy-action)

	// AuthResults maps "dmarc", "spf" and "dkim" to their lower-cased result
	// ("fail", "pass", "none"...), from the report's Authentication-Results
	// field first, then the original message's Authentication-Results (the
	// top one first) and Received-SPF headers: the first value found wins.
	// A check that AuthFailure names (see FailedChecks) and nothing else
	// speaks of is "fail"; a check nothing speaks of is absent. Nil when
	// empty.
	AuthResults map[string]string

	DKIMDomain, DKIMSelector string // DKIM-Domain / DKIM-Selector, else the first DKIM-Signature of the original
	IdentityAlignment        string // lower-cased as sent: "none", "spf", "dkim", "dkim, spf"

	Subject   string // of the ORIGINAL message, decoded
	MessageID string // of the ORIGINAL message (else the report's Message-ID field), without <> and white space

	// Headers are the original message's header fields in order, nil when
	// the report carried none. At most 1,000 are kept.
	Headers []Header
}

// FailedChecks returns which of the checks the API filters on ("dmarc",
// "spf", "dkim") AuthFailure names, in that order: the DKIM failure kinds
// of RFC 6591 (adsp, bodyhash, revoked, signature) count as "dkim".
func (r *Report) FailedChecks() []string {
	var dmarc, spf, dkim bool
	for _, v := range r.AuthFailure {
		switch v {
		case "dmarc":
			dmarc = true
		case "spf":
			spf = true
		case "dkim", "adsp", "bodyhash", "revoked", "signature":
			dkim = true
		}
	}
	var out []string
	for _, c := range []struct {
		on   bool
		name string
	}{{dmarc, "dmarc"}, {spf, "spf"}, {dkim, "dkim"}} {
		if c.on {
			out = append(out, c.name)
		}
	}
	return out
}

// Fingerprint is a SHA-256 hash of everything the report says: its fields,
// the dates, and the original's header fields in order. Copies of one
// report mail hash alike however and whenever they arrive; reports that
// differ in anything do not. It identifies a report that carries neither
// Arrival-Date nor a Date.
func (r *Report) Fingerprint() [sha256.Size]byte {
	h := sha256.New()
	put := func(ss ...string) {
		for _, s := range ss {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	put(r.FeedbackType, r.Version, r.UserAgent, r.SourceIP.String(), r.OriginalMailFrom)
	put(strconv.Itoa(len(r.OriginalRcptTo)))
	put(r.OriginalRcptTo...)
	put(r.ArrivalDate.Format(time.RFC3339), r.ReportDate.Format(time.RFC3339))
	put(r.ReportingMTA, r.Reporter, r.ReportedDomain)
	put(strconv.Itoa(len(r.AuthFailure)))
	put(r.AuthFailure...)
	put(r.DeliveryResult, r.AuthResults["dmarc"], r.AuthResults["spf"], r.AuthResults["dkim"])
	put(r.DKIMDomain, r.DKIMSelector, r.IdentityAlignment, r.Subject, r.MessageID)
	for _, f := range r.Headers {
		put(f.Name, f.Value)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// Size limits of failure reports. A report is a small mail; these bound
// what a hostile one can make us hold.
const (
	failMaxFeedback = 1 << 20  // a message/feedback-report part, decoded
	failMaxText     = 64 << 10 // text read from one text/plain part for the plain-text fallback
	failMaxTexts    = 4        // text/plain parts read for it
)

// Extract reads a whole report mail (an mbox "From " line first is
// skipped) and returns the DMARC failure reports in it, in order.
//
// It walks the MIME tree (at most lim.MaxDepth levels) for
// message/feedback-report parts, whatever the enclosing multipart
// (multipart/report, multipart/mixed...), whatever their transfer encoding
// (base64 too), several per mail; a message/rfc822 part whose own type is
// multipart/report is walked as a forwarded report mail. Each feedback part
// is paired with the nearest original: a message/rfc822 part (its header
// only: the body is skipped as it streams past, never kept) or a
// text/rfc822-headers part; when there are as many originals as feedback
// parts they pair in order. Any ARF Version is read ("1", "1.0"); missing
// fields are left empty. Feedback parts of other types are skipped.
//
// When the mail has no feedback part at all, its text/plain parts (and
// subject) are read as a plain-text failure notice, as some gateways send
// (Exim's): "Sender IP Address: ..." style lines, an embedded copy of the
// original headers. Such a notice yields a report only if it speaks of
// DMARC and failure and names a source IP.
//
// The mail is read once, as a stream, at most lim.MaxCompressed bytes.
//
// Errors: ErrNotFailureReport (wrapped, naming the Feedback-Type) when
// every feedback part is of another type; container.ErrNoReport when
// nothing was found; container.ErrTooLarge for a feedback part over 1 MiB
// (refused after reading 1 MiB of it), a header block over 1 MiB
// (container.MaxHeaderBlock), MIME nesting deeper than lim.MaxDepth, or a
// mail over lim.MaxCompressed; container.ErrMalformed for a broken MIME
// structure that left nothing usable. Errors of r come back wrapped.
func Extract(r io.Reader, lim container.Limits) ([]*Report, error) {
	w := &failWalker{}
	if err := w.run(r, lim); err != nil {
		return nil, err
	}
	return w.reports()
}

// reports turns what the walk collected into reports, or says why there
// are none.
func (w *failWalker) reports() ([]*Report, error) {
	fbs := w.pair()
	if len(fbs) == 0 {
		if rep := w.plainText(); rep != nil {
			if rep.FeedbackType != "auth-failure" {
				// A notice that names another feedback type (abuse, fraud)
				// is no DMARC failure report, as in the ARF path below.
				return nil, fmt.Errorf("dmarc: feedback type %q: %w", rep.FeedbackType, ErrNotFailureReport)
			}
			return []*Report{rep}, nil
		}
		if err := w.mime.Broken(); err != nil {
			return nil, err
		}
		return nil, container.NoReport("dmarc: no failure report in the mail")
	}
	var out []*Report
	other := ""
	for _, it := range fbs {
		rep := failBuild(it.fields, it.orig, it.mail)
		if rep.FeedbackType != "auth-failure" {
			if other == "" {
				other = rep.FeedbackType
			}
			continue
		}
		out = append(out, rep)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("dmarc: feedback type %q: %w", other, ErrNotFailureReport)
	}
	return out, nil
}
