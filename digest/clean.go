package digest

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxText is the longest string from a report a digest repeats, in runes.
const maxText = 400

// clean makes a string from a report (a sender's name, a reverse DNS
// name, an alert's title) safe for a line of the text part and for a
// mail header: invalid UTF-8, control characters (CR and LF among them),
// the Unicode line and paragraph separators and the bidirectional
// overrides become one space each, runs of spaces one, and it is cut at
// maxText runes. The HTML part escapes it besides (html/template).
func clean(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	n, space := 0, false
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		if r == utf8.RuneError && size == 1 || unsafeRune(r) || unicode.IsSpace(r) {
			r = ' '
		}
		if r == ' ' {
			if space || b.Len() == 0 {
				continue
			}
			space = true
		} else {
			space = false
		}
		if n == maxText {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimRight(b.String(), " ")
}

// unsafeRune reports whether r may change how the text around it reads:
// a control or format character (bidi overrides, zero-width joiners), or
// a line or paragraph separator.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clean(s)
	}
	return out
}
