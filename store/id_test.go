package store_test

import (
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// TestNewID ensures ids are canonical UUIDv7 text, unique and strictly increasing.
func TestNewID(t *testing.T) {
	const n = 10000 // well past the 2048 ids guaranteed per millisecond
	prev := ""
	seen := make(map[string]bool, n)
	for range n {
		id := store.NewID()
		if !store.ValidID(id) {
			t.Fatalf("NewID() = %q, not a valid id", id)
		}
		if id[14] != '7' {
			t.Fatalf("NewID() = %q, version nibble %c, want 7", id, id[14])
		}
		if !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("NewID() = %q, variant nibble %c, want 8..b", id, id[19])
		}
		if id <= prev {
			t.Fatalf("NewID() = %q after %q: not increasing", id, prev)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
		prev = id
	}
}

// TestValidID ensures only canonical lowercase UUID text is accepted.
func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"0190f5c4-7b1a-7c3d-8e4f-0123456789ab", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"0190F5C4-7B1A-7C3D-8E4F-0123456789AB", false},
		{"0190f5c47b1a7c3d8e4f0123456789ab", false},
		{"0190f5c4-7b1a-7c3d-8e4f-0123456789a", false},
		{"0190f5c4-7b1a-7c3d-8e4f-0123456789abc", false},
		{"0190f5c4_7b1a-7c3d-8e4f-0123456789ab", false},
		{"0190f5c4-7b1a-7c3d-8e4f-0123456789ag", false},
		{"{0190f5c4-7b1a-7c3d-8e4f-0123456789a}", false},
		{"", false},
	} {
		if got := store.ValidID(tc.in); got != tc.want {
			t.Errorf("ValidID(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestNewReportingLocal ensures reporting local parts are 12 characters of [a-z2-7] and differ.
func TestNewReportingLocal(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		s := store.NewReportingLocal()
		if len(s) != 12 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz234567") != "" {
			t.Fatalf("NewReportingLocal() = %q", s)
		}
		if seen[s] {
			t.Fatalf("NewReportingLocal() repeated %q", s)
		}
		seen[s] = true
	}
}

// TestValidKeyFormat ensures only dmk_ plus 32 lowercase hex digits is a key.
func TestValidKeyFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"dmk_0123456789abcdef0123456789abcdef", true},
		{"dmk_0123456789ABCDEF0123456789abcdef", false},
		{"dmk_0123456789abcdef0123456789abcde", false},
		{"dmk_0123456789abcdef0123456789abcdef0", false},
		{"dmx_0123456789abcdef0123456789abcdef", false},
		{"DMK_0123456789abcdef0123456789abcdef", false},
		{"dmk-0123456789abcdef0123456789abcdef", false},
		{"dmk_0123456789abcdef0123456789abcdeg", false},
		{"dmk_", false},
		{"", false},
	} {
		if got := store.ValidKeyFormat(tc.in); got != tc.want {
			t.Errorf("ValidKeyFormat(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
