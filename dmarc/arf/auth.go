package arf

import (
	"slices"
	"strings"
)

// failChecks are the checks AuthResults speaks of.
var failChecks = [...]string{"dmarc", "spf", "dkim"}

// failAuth returns AuthResults and AuthFailure of a report from its
// feedback fields f and its original's header orig (see Report).
func failAuth(f, orig failHeaders, identityAlignment string) (map[string]string, []string) {
	res := map[string]string{}
	for _, v := range f.All("Authentication-Results") {
		failMergeAR(res, v)
	}
	for _, v := range orig.All("Authentication-Results") {
		failMergeAR(res, v)
	}
	if _, ok := res["spf"]; !ok {
		if v := strings.Fields(orig.Get("Received-SPF")); len(v) > 0 {
			res["spf"] = strings.ToLower(v[0])
		}
	}
	failures := failAuthFailures(f)
	if failures == nil {
		failures = failDeriveAuthFailure(res, identityAlignment)
	}
	checked := &Report{AuthFailure: failures}
	for _, c := range checked.FailedChecks() {
		if _, ok := res[c]; !ok {
			res[c] = "fail"
		}
	}
	if len(res) == 0 {
		res = nil
	}
	return res, failures
}

// failAuthFailures returns the Auth-Failure values, lower-cased,
// deduplicated, in order (a field may list several, comma separated); nil
// when there are none.
func failAuthFailures(f failHeaders) []string {
	var out []string
	for _, v := range f.All("Auth-Failure") {
		for _, a := range strings.FieldsFunc(strings.ToLower(v), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			if a = failText(a); a != "" && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// failDeriveAuthFailure guesses Auth-Failure for reports without it
// (NetEase's): "dmarc" unless a result says DMARC passed (the report is a
// DMARC failure report), then "spf" and "dkim" when their result is a
// failure, or when Identity-Alignment is given and does not name them
// ("none" names neither).
func failDeriveAuthFailure(res map[string]string, identityAlignment string) []string {
	var out []string
	if res["dmarc"] != "pass" {
		out = append(out, "dmarc")
	}
	aligned := strings.FieldsFunc(identityAlignment, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	for _, c := range failChecks[1:] {
		unaligned := identityAlignment != "" && !slices.Contains(aligned, c)
		if failIsFailure(res[c]) || unaligned {
			out = append(out, c)
		}
	}
	return out
}

// failIsFailure reports whether an RFC 8601 result is a failure for
// DMARC's purposes: anything but pass and none (no signature, no SPF
// record, which the other fields speak of).
func failIsFailure(result string) bool {
	switch result {
	case "fail", "softfail", "hardfail", "neutral", "permerror", "temperror", "policy":
		return true
	}
	return false
}

// failMergeAR adds the dmarc, spf and dkim results of one
// Authentication-Results value to res, keeping results already there.
// Within one value a DKIM pass wins over other DKIM results: one good
// signature is enough for DMARC.
func failMergeAR(res map[string]string, v string) {
	var local [len(failChecks)]string // by index in failChecks; "" when not seen
	for _, seg := range failARSegments(v) {
		method, result, _ := failARMethod(seg)
		i := slices.Index(failChecks[:], method)
		if i < 0 || result == "" {
			continue
		}
		if local[i] == "" || method == "dkim" && local[i] != "pass" && result == "pass" {
			local[i] = result
		}
	}
	for i, c := range failChecks {
		if _, had := res[c]; !had && local[i] != "" {
			res[c] = local[i]
		}
	}
}

// failARMethod reads "method[/version]=result prop=value..." and returns a
// method of failChecks (else ""), its lower-cased result and the
// segment's property words.
func failARMethod(seg string) (method, result string, props []string) {
	words := strings.Fields(seg)
	if len(words) == 0 {
		return "", "", nil
	}
	k, val, ok := strings.Cut(words[0], "=")
	if !ok {
		return "", "", nil // the authserv-id, or "none"
	}
	k, _, _ = strings.Cut(strings.ToLower(k), "/")
	if !slices.Contains(failChecks[:], k) {
		return "", "", nil
	}
	return k, strings.ToLower(strings.Trim(val, `"`)), words[1:]
}

// failARSegments splits an Authentication-Results value at the semicolons
// outside quoted strings, drops (nested) comments, and writes "a = b" as
// "a=b" (RFC 8601 allows white space around '=').
func failARSegments(v string) []string {
	v = failStripComments(v)
	segs := make([]string, 0, 8)
	start, quoted := 0, false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			if quoted {
				i++
			}
		case '"':
			quoted = !quoted
		case ';':
			if !quoted {
				segs = append(segs, failTightEquals(v[start:i]))
				start = i + 1
			}
		}
	}
	return append(segs, failTightEquals(v[start:]))
}

// failStripComments removes RFC 5322 comments, nested ones too, outside
// quoted strings.
func failStripComments(v string) string {
	if !strings.Contains(v, "(") {
		return v
	}
	var b strings.Builder
	depth, quoted, from := 0, false, 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
		case quoted:
			quoted = c != '"'
		case c == '"' && depth == 0:
			quoted = true
		case c == '(':
			if depth == 0 {
				b.WriteString(v[from:i])
			}
			depth++
		case c == ')' && depth > 0:
			depth--
			if depth == 0 {
				from = i + 1
			}
		}
	}
	if depth == 0 && from < len(v) {
		b.WriteString(v[from:])
	}
	return b.String()
}

// failTightEquals removes white space around '='.
func failTightEquals(s string) string {
	if !strings.Contains(s, " =") && !strings.Contains(s, "= ") && !strings.Contains(s, "\t=") && !strings.Contains(s, "=\t") {
		return s
	}
	var b strings.Builder
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0, w == "=", strings.HasPrefix(w, "="), strings.HasSuffix(b.String(), "="):
		default:
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// failARHeaderFrom returns the header.from of a dmarc result in the
// Authentication-Results of the report, then of the original: the domain
// the message claimed to come from.
func failARHeaderFrom(f, orig failHeaders) string {
	for _, h := range [...]failHeaders{f, orig} {
		for _, v := range h.All("Authentication-Results") {
			for _, seg := range failARSegments(v) {
				method, _, props := failARMethod(seg)
				if method != "dmarc" {
					continue
				}
				for _, p := range props {
					if k, val, ok := strings.Cut(p, "="); ok && strings.EqualFold(k, "header.from") {
						if d := failDomain(strings.Trim(val, `"`)); d != "" {
							return d
						}
					}
				}
			}
		}
	}
	return ""
}
