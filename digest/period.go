package digest

import (
	"fmt"
	"time"
)

// Period is how much mail a digest covers: a UTC day or a week.
type Period string

// The periods of a digest.
const (
	// Day is the last complete UTC day: at any time on the 29th, the 28th.
	Day Period = "day"
	// Week is the last complete week, Monday to Sunday in UTC: at any time
	// from Monday the 23rd to Sunday the 29th, the 16th to the 22nd.
	Week Period = "week"
)

// ParsePeriod reads "day" or "week" ("" is Day).
func ParsePeriod(s string) (Period, error) {
	switch Period(s) {
	case "", Day:
		return Day, nil
	case Week:
		return Week, nil
	}
	return "", fmt.Errorf("unknown period %q: day or week", s)
}

// days is how many UTC days the period spans.
func (p Period) days() int {
	if p == Week {
		return 7
	}
	return 1
}

// Bounds returns the first and last UTC day (00:00 UTC each, both
// included) of the last complete period at now.
func (p Period) Bounds(now time.Time) (from, to time.Time) {
	today := now.UTC().Truncate(24 * time.Hour)
	if p == Week {
		// Monday is 0: the week of today started back days ago.
		back := (int(today.Weekday()) + 6) % 7
		to = today.AddDate(0, 0, -back-1)
	} else {
		to = today.AddDate(0, 0, -1)
	}
	return to.AddDate(0, 0, -(p.days() - 1)), to
}

// Key names the period ending on day to, for the marker of a sent
// digest: "day 2026-11-28", "week 2026-11-16".
func (p Period) Key(from time.Time) string {
	return string(p) + " " + from.UTC().Format(time.DateOnly)
}

// Label is the period as a subject says it: "28 Nov 2026" or "week of
// 16–22 Nov 2026".
func (p Period) Label(from, to time.Time) string {
	if p == Week {
		if from.Month() == to.Month() {
			return fmt.Sprintf("week of %d–%s", from.Day(), to.Format("2 Jan 2006"))
		}
		if from.Year() == to.Year() {
			return fmt.Sprintf("week of %s – %s", from.Format("2 Jan"), to.Format("2 Jan 2006"))
		}
		return fmt.Sprintf("week of %s – %s", from.Format("2 Jan 2006"), to.Format("2 Jan 2006"))
	}
	return to.Format("Mon 2 Jan 2006")
}
