// Package numfmt formats the figures people read, once for every front
// end that shows them: the web interface and the mailed digests say a pass
// rate and a count the same way.
package numfmt

import (
	"fmt"
	"strconv"
)

// Percent writes a fraction (0.9876) as a percentage with one decimal and
// a space before the sign: "98.8 %".
func Percent(f float64) string { return fmt.Sprintf("%.1f %%", f*100) }

// Share is n of total as Percent does, "–" without a total.
func Share(n, total int64) string {
	if total <= 0 {
		return "–"
	}
	return Percent(float64(n) / float64(total))
}

// Count writes n with commas between thousands: "1,234,567".
func Count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	b := make([]byte, 0, len(s)+len(s)/3+1)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}
