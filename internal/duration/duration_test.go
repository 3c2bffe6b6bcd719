package duration

import (
	"strings"
	"testing"
	"time"
)

// TestParse ensures days are read alone and before Go units, and bad
// input gets an error naming the forms accepted.
func TestParse(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"400d": 400 * Day, "1d12h": 36 * time.Hour, "36h": 36 * time.Hour, "15m": 15 * time.Minute,
		"0": 0, "0d": 0, " 30s ": 30 * time.Second, "-1d": -Day, "2d30m": 2*Day + 30*time.Minute, "1.5h": 90 * time.Minute,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "400", "4 00d", "1w", "d5", "1.5d", "1d-5h", "1d+5h", "x1d", "99999999999999d", "1d1d"} {
		if d, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
		} else if in != "99999999999999d" && !strings.Contains(err.Error(), "400d") {
			t.Errorf("Parse(%q) error %q names no example", in, err)
		}
	}
}

// TestFormatRoundTrips ensures Format writes what Parse reads back.
func TestFormatRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{0, time.Second, 90 * time.Second, Day, 400 * Day, 36 * time.Hour, -2 * Day} {
		s := Format(d)
		back, err := Parse(s)
		if err != nil || back != d {
			t.Errorf("Format(%v) = %q, read back as %v, %v", d, s, back, err)
		}
	}
	if s := Format(400 * Day); s != "400d" {
		t.Errorf("Format(400 days) = %q", s)
	}
}

// TestSliceValue ensures the list flag replaces its default, then appends.
func TestSliceValue(t *testing.T) {
	var ds []time.Duration
	v := NewSliceValue(&ds, []time.Duration{time.Second})
	if err := v.Set("30s,1d"); err != nil {
		t.Fatal(err)
	}
	if err := v.Set("2m"); err != nil {
		t.Fatal(err)
	}
	if v.String() != "[30s,1d,2m0s]" {
		t.Errorf("String() = %s", v.String())
	}
	if err := v.Replace([]string{"1h"}); err != nil || len(ds) != 1 || ds[0] != time.Hour {
		t.Errorf("Replace: %v %v", ds, err)
	}
	if err := v.Set("1w"); err == nil {
		t.Error("1w accepted")
	}
}

// FuzzParse ensures Parse never panics and what it accepts formats back to
// the same duration.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"400d", "1d12h", "15m", "-1d", "0", "1.5h", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(Format(d))
		if err != nil || back != d {
			t.Fatalf("Parse(%q) = %v; Format = %q reads back as %v, %v", s, d, Format(d), back, err)
		}
	})
}
