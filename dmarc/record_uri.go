package dmarc

import (
	"fmt"
	"net/url"
	"strings"
)

// uriList reads the dmarc-urilist of a rua or ruf tag (RFC 9989 section
// 4.8): URIs separated by commas with optional blanks. Invalid URIs are
// problems; the valid ones are returned.
func (p *parser) uriList(t Tag) []URI {
	if t.Value == "" {
		p.problem("%s has no URI", t.Name)
		return nil
	}
	var out []URI
	for raw := range strings.SplitSeq(t.Value, ",") {
		raw = strings.Trim(raw, wsp)
		u, problem := parseURI(raw)
		if problem != "" {
			p.problem("%s: %s", t.Name, problem)
			continue
		}
		if u.Size != "" {
			p.warn("%s URI %q has a size suffix, which RFC 9989 removed (Appendix C.4) and its receivers ignore", t.Name, raw)
		}
		if u.Scheme != "mailto" {
			p.warn("%s URI %q is not a mailto: URI; receivers must support only mailto (RFC 9989 section 4.7)", t.Name, raw)
		}
		out = append(out, u)
	}
	return out
}

// parseURI reads one DMARC URI: a URI (RFC 3986) with the optional RFC 7489
// section 6.2 size suffix "!" 1*DIGIT [k/m/g/t]. Because "!" and "," must be
// percent-encoded inside the URI itself, the last "!" starts the suffix.
// It returns a problem sentence when raw is not valid.
func parseURI(raw string) (URI, string) {
	if raw == "" {
		return URI{}, "empty URI in the list"
	}
	u := URI{Raw: raw}
	base := raw
	if i := strings.LastIndexByte(raw, '!'); i >= 0 {
		base, u.Size = raw[:i], raw[i:]
		if !isSizeSuffix(u.Size[1:]) {
			return URI{}, fmt.Sprintf("%q has a bad size suffix (want e.g. !10m)", raw)
		}
	}
	parsed, err := url.Parse(base)
	if err != nil || parsed.Scheme == "" {
		if strings.Contains(base, "@") && !strings.Contains(base, ":") {
			return URI{}, fmt.Sprintf("%q is not a URI (write mailto:%s)", raw, base)
		}
		return URI{}, fmt.Sprintf("%q is not a URI", raw)
	}
	u.Scheme = parsed.Scheme
	u.Address = base
	if u.Scheme != "mailto" {
		return u, ""
	}
	addr, problem := mailtoAddress(parsed)
	if problem != "" {
		return URI{}, fmt.Sprintf("%q %s", raw, problem)
	}
	u.Address = addr
	return u, ""
}

func isSizeSuffix(s string) bool {
	if n := len(s); n > 0 && strings.ContainsRune("kmgtKMGT", rune(s[n-1])) {
		s = s[:n-1]
	}
	return isDigits(s)
}

// mailtoAddress extracts the single addr-spec of a mailto URI (RFC 6068),
// dropping any ?header part.
func mailtoAddress(u *url.URL) (string, string) {
	addr, err := url.PathUnescape(u.Opaque)
	if err != nil || addr == "" {
		return "", "has no e-mail address"
	}
	local, domain, ok := cutLast(addr, "@")
	if !ok || local == "" || strings.ContainsAny(addr, " \t,<>") {
		return "", "is not a single e-mail address"
	}
	if _, err := NormalizeDomain(domain); err != nil {
		return "", "has an invalid mail domain"
	}
	return addr, ""
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// MailtoHost returns the domain part of a mailto URI's address, lower-case,
// or "" for other schemes. RFC 7489 section 7.1 calls it the destination
// host when checking external reporting authorization.
func (u URI) MailtoHost() string {
	if u.Scheme != "mailto" {
		return ""
	}
	_, host, _ := cutLast(u.Address, "@")
	return strings.ToLower(host)
}
