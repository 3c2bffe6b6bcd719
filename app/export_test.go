package app

import (
	"testing"
)

// TestCSVCell ensures exactly the cells a spreadsheet would run as a
// formula get the quote prefix, and nothing else changes.
func TestCSVCell(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"example.com", "example.com"},
		{"203.0.113.7", "203.0.113.7"},
		{"2001:db8::1", "2001:db8::1"},
		{"=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"},
		{"+1", "'+1"},
		{"-1", "'-1"},
		{"@SUM(A1:A9)", "'@SUM(A1:A9)"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{"a=1", "a=1"},
		{" =1", " =1"},
		{"'quoted'", "'quoted'"},
		{`say "hi", then go`, `say "hi", then go`},
	} {
		if got := csvCell(c.in); got != c.want {
			t.Errorf("csvCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
