package arf

import (
	"strconv"
	"strings"
	"time"
)

// ParseDate reads a date as reporters write them into Arrival-Date and
// notices, and returns it in UTC:
//   - RFC 5322, with or without the day name or the seconds, a one-digit
//     day, a two-digit year, a numeric zone ("+0200", "+02:00") or an
//     obsolete one (UT, GMT, EST, PDT..., military letters), comments
//     ("(UTC)", "(CEST)") and extra white space: "Mon, 1 Oct 2018 11:20:27
//     +0200 (CEST)", "01 Oct 2018 11:20 GMT";
//   - RFC 3339 and its space-separated variant, with fractional seconds:
//     "2018-10-01T09:20:27Z", "2018-09-28 08:48:36.858842501 +0000 UTC";
//   - asctime and RFC 850: "Tue Apr 30 02:09:16 2019", "Monday, 01-Oct-18
//     11:20:27 GMT";
//   - Unix seconds (9 to 11 digits, a fraction allowed): "1538385627".
//
// A date without a zone is taken as UTC; an unknown alphabetic zone as
// UTC too (RFC 5322 section 4.3 says so of military zones). It reports
// false for anything else: ParseDate returns no error.
func ParseDate(s string) (time.Time, bool) {
	if len(s) > 256 {
		return time.Time{}, false
	}
	s = strings.Join(strings.Fields(dateStripComments(s)), " ")
	if s == "" {
		return time.Time{}, false
	}
	if t, ok := dateUnix(s); ok {
		return t, true
	}
	if len(s) >= 16 && s[4] == '-' { // cheap test: failed parses allocate their error
		for _, l := range dateISOLayouts {
			if t, err := time.Parse(l, s); err == nil {
				return t.UTC(), true
			}
		}
	}
	return dateWords(s)
}

// dateISOLayouts are tried on the whole string: their zone is glued to
// the time.
var dateISOLayouts = [...]string{
	time.RFC3339Nano,
	"2006-01-02T15:04Z07:00",
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02T15:04:05Z0700",
	"2006-01-02 15:04:05Z0700",
}

// dateLayouts are tried once day names, zones and commas are gone.
// Fractional seconds after "05" are accepted by time.Parse.
var dateLayouts = [...]string{
	"2 Jan 2006 15:04:05",
	"2 Jan 2006 15:04",
	"2 Jan 06 15:04:05",
	"2 Jan 06 15:04",
	"2 January 2006 15:04:05",
	"2 January 2006 15:04",
	"January 2 2006 15:04:05",
	"Jan 2 15:04:05 2006",
	"Jan 2 2006 15:04:05",
	"Jan 2 2006 15:04",
	"2-Jan-2006 15:04:05",
	"2-Jan-06 15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006/01/02 15:04:05",
	"2006-01-02",
	"2 Jan 2006",
}

// dateUnix reads Unix seconds.
func dateUnix(s string) (time.Time, bool) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(whole) < 9 || len(whole) > 11 || !dateDigits(whole) || !dateDigits(frac) {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var nsec int64
	if frac != "" {
		frac = (frac + "000000000")[:9]
		nsec, _ = strconv.ParseInt(frac, 10, 64)
	}
	return time.Unix(sec, nsec).UTC(), true
}

func dateDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// dateWords drops the day name, the zone and Go's monotonic clock reading
// ("m=+1856335.5"), parses the rest with dateLayouts and applies the zone.
// A numeric zone wins over a named one ("+0000 UTC").
func dateWords(s string) (time.Time, bool) {
	var rest []string
	offset, numeric, named := 0, false, false
	for _, w := range strings.Fields(strings.ReplaceAll(s, ",", " ")) {
		switch {
		case dateDayName(w), strings.HasPrefix(w, "m="):
			continue
		case len(rest) > 0:
			if off, ok := dateNumericZone(w); ok {
				if !numeric {
					offset, numeric = off, true
				}
				continue
			}
			if off, ok := dateZoneName(w); ok {
				if !numeric && !named {
					offset, named = off, true
				}
				continue
			}
		}
		rest = append(rest, w)
	}
	joined := strings.Join(rest, " ")
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, joined); err == nil {
			return t.Add(-time.Duration(offset) * time.Second).UTC(), true
		}
	}
	return time.Time{}, false
}

// dateNumericZone reads "+hhmm", "+hh:mm", "+hh", also after "GMT" or
// "UTC" ("GMT+0200"), into seconds east of UTC.
func dateNumericZone(w string) (int, bool) {
	if len(w) > 3 && (strings.EqualFold(w[:3], "GMT") || strings.EqualFold(w[:3], "UTC")) {
		w = w[3:]
	}
	if len(w) < 3 || w[0] != '+' && w[0] != '-' {
		return 0, false
	}
	digits := strings.Replace(w[1:], ":", "", 1)
	if !dateDigits(digits) || len(digits) != 4 && len(digits) != 2 {
		return 0, false
	}
	h, _ := strconv.Atoi(digits[:2])
	m := 0
	if len(digits) == 4 {
		m, _ = strconv.Atoi(digits[2:])
	}
	if h > 23 || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	if w[0] == '-' {
		off = -off
	}
	return off, true
}

// dateZoneName returns the offset of a zone name: RFC 5322's obsolete
// zones, a few common abbreviations, and 0 for any other upper-case word
// of 1 to 5 letters that is not a month (military zones, unknown names).
func dateZoneName(w string) (int, bool) {
	switch strings.ToUpper(w) {
	case "UT", "UTC", "GMT", "Z", "WET":
		return 0, true
	case "EST":
		return -5 * 3600, true
	case "EDT", "AST":
		return -4 * 3600, true
	case "CST":
		return -6 * 3600, true
	case "CDT":
		return -5 * 3600, true
	case "MST":
		return -7 * 3600, true
	case "MDT":
		return -6 * 3600, true
	case "PST":
		return -8 * 3600, true
	case "PDT":
		return -7 * 3600, true
	case "CET", "BST", "WEST":
		return 3600, true
	case "CEST", "EET":
		return 2 * 3600, true
	case "EEST", "MSK":
		return 3 * 3600, true
	case "JST", "KST":
		return 9 * 3600, true
	}
	if len(w) > 5 || strings.ToUpper(w) != w || dateMonth(w) {
		return 0, false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'A' || w[i] > 'Z' {
			return 0, false
		}
	}
	return 0, true
}

func dateMonth(w string) bool {
	_, short := time.Parse("Jan", w)
	_, long := time.Parse("January", w)
	return short == nil || long == nil
}

// dateDayName reports whether w is a day name ("Mon", "Monday", "Mon.").
func dateDayName(w string) bool {
	w = strings.ToLower(strings.TrimSuffix(w, "."))
	switch w {
	case "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun",
		"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday":
		return true
	}
	return false
}

// dateStripComments removes RFC 5322 comments: "(UTC)", nested ones too.
func dateStripComments(s string) string {
	if !strings.Contains(s, "(") {
		return s
	}
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}
