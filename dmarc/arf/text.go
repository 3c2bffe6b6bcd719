package arf

import (
	"regexp"
	"slices"
	"strings"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// Plain-text failure notices (no message/feedback-report part) are read
// into the same fields an ARF part has, then built like one. Exim's look
// like
//
//	A message claiming to be from you has failed the published DMARC policy for your domain.
//
//	  Sender Domain: example.com
//	  Sender IP Address: 203.0.113.68
//	  Received date: Mon, 07 Apr 2025 23:16:09 +0200
//	  SPF Alignment: no
//	  DKIM Alignment: no
//	  DMARC Results: None, Accept
//
//	------ This is a copy of the headers that were received before the error was detected.
//
//	Received: from [203.0.113.68] ...
//
// Others write prose ("received from IP 10.10.10.10 on <date>") or put
// ARF-like fields in the text.

// Patterns of the prose fallbacks; compiled once, never changed.
var (
	failIPPhrase      = regexp.MustCompile(`(?i)\bip(?:\s+address)?\s*[:=]?\s*\[?((?:\d{1,3}\.){3}\d{1,3}|[0-9a-f]*:[0-9a-f:.]+)\]?(?:\s+on\s+([^\r\n]+))?`)
	failDomainPhrase  = regexp.MustCompile(`(?i)\b(?:report|failure|policy)\s+for\s+(?:domain\s+)?([a-z0-9][a-z0-9.-]*\.[a-z]{2,})\b`)
	failHeaderNames   = []string{"received", "from", "subject", "message-id", "date", "authentication-results", "return-path", "dkim-signature"}
	failARFFieldNames = []string{"feedback-type", "source-ip", "arrival-date", "reported-domain", "auth-failure", "original-mail-from"}
)

// plainText reads a mail without feedback part as a failure notice; nil
// when it is not one (it must speak of DMARC and of failure, and name the
// source IP).
func (w *failWalker) plainText() *Report {
	if w.top == nil {
		return nil
	}
	var b strings.Builder
	for _, t := range w.texts {
		b.WriteString(t.text)
		b.WriteString("\n\n")
	}
	body := b.String()
	lower := strings.ToLower(w.top.subject + "\n" + body)
	if !strings.Contains(lower, "dmarc") || !strings.Contains(lower, "fail") && !strings.Contains(lower, "forensic") {
		return nil
	}
	f, embedded := failScrape(body, w.top.subject)
	if !failParseIP(f.Get("Source-IP")).IsValid() {
		return nil
	}
	orig := embedded
	for _, it := range w.items {
		if it.isOrig {
			orig = it.orig
			break
		}
	}
	return failBuild(f, orig, w.top)
}

// failScrape returns the ARF fields a notice's text gives, and the copy of
// the original headers it quotes (nil when none).
func failScrape(body, subject string) (f, embedded failHeaders) {
	var kv []Header // "Key: value" lines of the prose, keys normalized
	for para := range strings.SplitSeq(strings.ReplaceAll(body, "\r\n", "\n"), "\n\n") {
		if h := container.ParseFields(para); failStartsWithField(para) && len(h) > 0 {
			switch {
			case failHasAny(h, failARFFieldNames):
				f = append(f, h...)
				continue
			case embedded == nil && failHasAny(h, failHeaderNames):
				embedded = h
				continue
			}
		}
		for line := range strings.SplitSeq(para, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				kv = append(kv, Header{Name: failNormKey(k), Value: strings.TrimSpace(v)})
			}
		}
	}
	f = append(f, failFromKeys(kv)...)
	f = append(f, failFromProse(body, subject)...)
	if f.Get("Feedback-Type") == "" {
		f = append(f, Header{Name: "Feedback-Type", Value: "auth-failure"})
	}
	return f, embedded
}

// failStartsWithField reports whether text begins with a header field
// line ("Name: value", no indentation).
func failStartsWithField(text string) bool {
	text = strings.TrimLeft(text, "\r\n")
	name, _, ok := strings.Cut(text, ":")
	return ok && !strings.ContainsAny(name, "\n") && container.IsFieldName(name)
}

func failHasAny(h failHeaders, names []string) bool {
	return slices.ContainsFunc(h, func(f Header) bool { return slices.Contains(names, strings.ToLower(f.Name)) })
}

// failNormKey lower-cases a prose key and drops list numbering and
// punctuation: " 1. Sender-IP Address" -> "sender ip address".
func failNormKey(k string) string {
	k = strings.ToLower(k)
	k = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r
		case r >= '0' && r <= '9':
			return r
		}
		return ' '
	}, k)
	words := strings.Fields(k)
	for len(words) > 0 && strings.Trim(words[0], "0123456789") == "" {
		words = words[1:]
	}
	return strings.Join(words, " ")
}

// failKeyField returns the ARF field a prose key gives, or "".
func failKeyField(key string) string {
	switch key {
	case "sender domain", "reported domain", "policy domain", "header from":
		return "Reported-Domain"
	case "received date", "date received", "arrival date":
		return "Arrival-Date"
	case "original mail from", "envelope from", "mail from":
		return "Original-Mail-From"
	case "original rcpt to", "envelope to", "rcpt to":
		return "Original-Rcpt-To"
	case "delivery result":
		return "Delivery-Result"
	case "auth failure":
		return "Auth-Failure"
	}
	return ""
}

// failFromKeys turns prose "Key: value" lines into ARF fields: the keys of
// failKeyField, any key with the word "ip" whose value is an address, and
// "SPF Alignment"/"DKIM Alignment" yes/no into Identity-Alignment.
func failFromKeys(kv []Header) failHeaders {
	var f failHeaders
	set := func(name, v string) {
		if v != "" && f.Get(name) == "" {
			f = append(f, Header{Name: name, Value: v})
		}
	}
	align := map[string]bool{}
	for _, h := range kv {
		if name := failKeyField(h.Name); name != "" {
			set(name, h.Value)
		}
		if slices.Contains(strings.Fields(h.Name), "ip") && failParseIP(h.Value).IsValid() {
			set("Source-IP", h.Value)
		}
		if c, ok := strings.CutSuffix(h.Name, " alignment"); ok && (c == "spf" || c == "dkim") {
			v := strings.ToLower(h.Value)
			align[c] = strings.HasPrefix(v, "yes") || strings.HasPrefix(v, "pass") || v == "aligned"
		}
	}
	if len(align) == 2 {
		var ia []string
		for _, c := range []string{"dkim", "spf"} {
			if align[c] {
				ia = append(ia, c)
			}
		}
		if ia == nil {
			ia = []string{"none"}
		}
		set("Identity-Alignment", strings.Join(ia, ", "))
	}
	return f
}

// failFromProse finds a source IP (and the date after it) and the domain
// in sentences: "received from IP 10.10.10.10 on Mon, 01 Oct 2018 ...",
// a subject "... (mail-from=a@b, ip=10.10.10.10)" or "Report for example.com".
func failFromProse(body, subject string) failHeaders {
	var f failHeaders
	for _, text := range []string{body, subject} {
		if m := failIPPhrase.FindStringSubmatch(text); m != nil && failParseIP(m[1]).IsValid() {
			f = append(f, Header{Name: "Source-IP", Value: m[1]})
			if _, ok := ParseDate(strings.TrimSuffix(strings.TrimSpace(m[2]), ".")); ok {
				f = append(f, Header{Name: "Arrival-Date", Value: strings.TrimSuffix(strings.TrimSpace(m[2]), ".")})
			}
			break
		}
	}
	for _, text := range []string{subject, body} {
		if m := failDomainPhrase.FindStringSubmatch(text); m != nil {
			f = append(f, Header{Name: "Reported-Domain", Value: m[1]})
			break
		}
	}
	return f
}
