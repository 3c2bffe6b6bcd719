package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// daysDuration is a duration flag that also takes whole days ("400d"),
// as retention windows are said. It is local to the flags of issue 13
// (import --retention, quarantine delete --older-than ...) until the
// command line gets one parser for every duration.
type daysDuration time.Duration

// String formats the value in days when it is whole days.
func (d *daysDuration) String() string {
	v := time.Duration(*d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", v/(24*time.Hour))
	}
	return v.String()
}

// Set reads "400d", "36h", "90m" or "0".
func (d *daysDuration) Set(s string) error {
	v, err := parseDays(s)
	if err != nil {
		return err
	}
	*d = daysDuration(v)
	return nil
}

// Type names the value in --help.
func (d *daysDuration) Type() string { return "duration" }

// parseDays reads a Go duration or a whole number of days ("30d"); it must
// not be negative.
func parseDays(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseUint(n, 10, 32)
		if err != nil || days > 100*365 {
			return 0, fmt.Errorf("%q: want a whole number of days such as 400d, or a duration such as 36h", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q: want a duration such as 36h or 30d, not negative", s)
	}
	return v, nil
}
