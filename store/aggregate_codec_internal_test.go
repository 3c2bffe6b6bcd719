package store

import "testing"

// TestSymbolOf finds every symbol at its index, and nothing for strings
// that only look like one (same length and first letter, another case,
// longer than any).
func TestSymbolOf(t *testing.T) {
	for i, s := range symbols {
		if got := symbolOf(s); got != byte(i+1) {
			t.Errorf("symbolOf(%q) = %d, want %d", s, got, i+1)
		}
	}
	for _, s := range []string{"nope", "pasS", "Pass", "rejecT", "x", "permerrors", "trusted_forwarders_and_more", "ü", "0", "\xff"} {
		if got := symbolOf(s); got != 0 {
			t.Errorf("symbolOf(%q) = %d, want 0", s, got)
		}
	}
	// A record with a value that is no symbol still round-trips.
	e := enc(nil).sym("pass").sym("Pass").sym("")
	d := &dec{b: e}
	if a, b, c := d.sym(), d.sym(), d.sym(); a != "pass" || b != "Pass" || c != "" || !d.ok() {
		t.Errorf("decoded %q %q %q", a, b, c)
	}
}
