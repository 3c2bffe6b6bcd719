package arf

import (
	"testing"
	"time"
)

// TestParseDate ensures the date formats reporters use are read into the
// right UTC instant, and that anything else is refused.
func TestParseDate(t *testing.T) {
	base := time.Date(2018, 10, 1, 9, 20, 27, 0, time.UTC) // 11:20:27 +0200
	tests := []struct {
		in   string
		want time.Time // zero: refused
	}{
		{"Mon, 01 Oct 2018 11:20:27 +0200", base},
		{"Mon, 1 Oct 2018 11:20:27 +0200", base},
		{"01 Oct 2018 11:20:27 +0200", base},
		{"Mon,  1 Oct 2018 11:20:27 +0200 (CEST)", base},
		{"Mon, 1 Oct 2018 11:20:27 +02:00", base},
		{"Monday, 1 October 2018 11:20:27 +0200", base},
		{"mon, 1 oct 2018 11:20:27 +0200", base},
		{"Mon, 1 Oct 2018 09:20:27 GMT", base},
		{"Mon, 1 Oct 2018 09:20:27 UT", base},
		{"Mon, 1 Oct 2018 09:20:27 Z", base},
		{"Mon, 1 Oct 2018 09:20:27 -0000", base},
		{"Mon, 1 Oct 2018 09:20:27", base},
		{"Mon, 1 Oct 2018 05:20:27 EDT", base},
		{"Mon, 1 Oct 2018 04:20:27 EST", base},
		{"Mon, 1 Oct 2018 02:20:27 PDT", base},
		{"Mon, 1 Oct 2018 02:20:27 MST", base},
		{"Mon, 1 Oct 2018 11:20:27 CEST", base},
		{"Mon, 1 Oct 2018 09:20:27 J", base}, // military zone: -0000 per RFC 5322
		{"Mon, 1 Oct 2018 11:20:27 +0200 (MST)", base},
		{"Mon, 1 Oct 2018 03:20:27 -0600 (UTC)", base},
		{"Mon, 1 Oct 18 11:20:27 +0200", base},
		{"Mon, 1 Oct 2018 11:20 +0200", base.Add(-27 * time.Second)},
		{"Mon, 1 Oct 2018 09:20:27 GMT+0000", base},
		{"2018-10-01T09:20:27Z", base},
		{"2018-10-01T11:20:27+02:00", base},
		{"2018-10-01T09:20:27.5Z", base.Add(500 * time.Millisecond)},
		{"2018-10-01 11:20:27+02:00", base},
		{"2018-10-01 09:20:27", base},
		{"2018-10-01 09:20:27.858842501 +0000 UTC m=+1856335.516585242", base.Add(858842501)},
		{"2018-10-01", time.Date(2018, 10, 1, 0, 0, 0, 0, time.UTC)},
		{"Mon Oct  1 09:20:27 2018", base},
		{"Mon Oct 1 04:20:27 EST 2018", base},
		{"Monday, 01-Oct-18 09:20:27 GMT", base},
		{"1538385627", base},
		{"1538385627.25", base.Add(250 * time.Millisecond)},
		{"  1538385627 ", base},
		{"", time.Time{}},
		{"yesterday", time.Time{}},
		{"2018", time.Time{}},
		{"12345678", time.Time{}},
		{"Mon, 32 Oct 2018 11:20:27 +0200", time.Time{}},
		{"Mon, 1 Oct 2018 25:20:27 +0200", time.Time{}},
		{"Mon, 1 Oct 2018 11:20:27 +2500", time.Time{}},
		{"Mon, 1 Foo 2018 11:20:27 +0200", time.Time{}},
		{"1 Oct 2018 11:20:27 +0200 trailing words", time.Time{}},
		{"(only a comment)", time.Time{}},
	}
	for _, tt := range tests {
		got, ok := ParseDate(tt.in)
		if ok != !tt.want.IsZero() || !got.Equal(tt.want) {
			t.Errorf("ParseDate(%q) = %v, %v; want %v", tt.in, got, ok, tt.want)
			continue
		}
		if ok && got.Location() != time.UTC {
			t.Errorf("ParseDate(%q) in %v, want UTC", tt.in, got.Location())
		}
	}
}
