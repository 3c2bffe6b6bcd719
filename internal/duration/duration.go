// Package duration parses the durations of dmarcd's flags: Go's
// time.ParseDuration units plus days ("400d", "1d12h"), the unit retention
// periods are thought in. Every duration flag goes through Value or
// SliceValue, so they all accept the same forms.
package duration

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Day is 24 hours; days here ignore daylight saving time.
const Day = 24 * time.Hour

// Parse reads a duration: what time.ParseDuration reads, where a leading
// whole number of days may come first ("400d", "2d12h", "-1d"). Errors
// name the forms accepted.
func Parse(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	neg := strings.HasPrefix(in, "-")
	rest := strings.TrimLeft(in, "+-")
	var total time.Duration
	if i := strings.IndexByte(rest, 'd'); i > 0 && allDigits(rest[:i]) {
		days, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil || days > math.MaxInt64/int64(Day) {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total = time.Duration(days) * Day
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 || strings.HasPrefix(rest, "+") {
			return 0, syntaxError(s)
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		total += d
	} else if total == 0 && !strings.HasSuffix(in, "d") {
		return 0, syntaxError(s)
	}
	if neg {
		total = -total
	}
	return total, nil
}

func syntaxError(s string) error {
	return fmt.Errorf("duration %q: want a number with a unit, e.g. 400d, 36h, 15m, 30s or 1d12h (units d, h, m, s, ms)", s)
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Format writes d as Parse reads it, in days where that is exact and
// shorter: 400 days is "400d", 36 hours "1d12h0m0s", 90 seconds "1m30s".
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	if d >= Day {
		days := d / Day
		if rem := d % Day; rem != 0 {
			return sign + strconv.FormatInt(int64(days), 10) + "d" + rem.String()
		}
		return sign + strconv.FormatInt(int64(days), 10) + "d"
	}
	return sign + d.String()
}

// Value is a pflag.Value of one duration.
type Value struct{ p *time.Duration }

// NewValue returns a Value storing into p, which is set to def.
func NewValue(p *time.Duration, def time.Duration) *Value {
	*p = def
	return &Value{p: p}
}

// Set parses s.
func (v *Value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}

// String formats the value.
func (v *Value) String() string {
	if v == nil || v.p == nil {
		return "0s"
	}
	return Format(*v.p)
}

// Type names the value in help texts.
func (v *Value) Type() string { return "duration" }

// SliceValue is a pflag.Value (and pflag.SliceValue) of a comma-separated
// list of durations.
type SliceValue struct {
	p       *[]time.Duration
	changed bool
}

// NewSliceValue returns a SliceValue storing into p, set to def.
func NewSliceValue(p *[]time.Duration, def []time.Duration) *SliceValue {
	*p = append([]time.Duration(nil), def...)
	return &SliceValue{p: p}
}

// Set parses a comma-separated list; the first Set replaces the default,
// later ones append (a repeated flag).
func (v *SliceValue) Set(s string) error {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := Parse(part)
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	if v.changed {
		*v.p = append(*v.p, out...)
	} else {
		*v.p = out
	}
	v.changed = true
	return nil
}

// Replace sets the list to vals (pflag.SliceValue).
func (v *SliceValue) Replace(vals []string) error {
	var out []time.Duration
	for _, s := range vals {
		d, err := Parse(s)
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	*v.p = out
	return nil
}

// Append adds one duration (pflag.SliceValue).
func (v *SliceValue) Append(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*v.p = append(*v.p, d)
	return nil
}

// GetSlice returns the durations formatted (pflag.SliceValue).
func (v *SliceValue) GetSlice() []string {
	out := make([]string, len(*v.p))
	for i, d := range *v.p {
		out[i] = Format(d)
	}
	return out
}

// String formats the list as "[30s,2m0s]", as pflag does.
func (v *SliceValue) String() string {
	if v == nil || v.p == nil {
		return "[]"
	}
	return "[" + strings.Join(v.GetSlice(), ",") + "]"
}

// Type names the value in help texts.
func (v *SliceValue) Type() string { return "durationSlice" }
