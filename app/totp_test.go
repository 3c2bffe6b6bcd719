package app

import (
	"testing"
	"time"
)

// TestHOTPVectors checks hotp against RFC 6238's SHA-1 test vectors
// (appendix B: 8 digits, key "12345678901234567890", 30 s steps).
func TestHOTPVectors(t *testing.T) {
	key := []byte("12345678901234567890")
	for _, v := range []struct {
		unix int64
		want string
	}{
		{59, "94287082"}, {1111111109, "07081804"}, {1111111111, "14050471"},
		{1234567890, "89005924"}, {2000000000, "69279037"}, {20000000000, "65353130"},
	} {
		if got := hotp(key, uint64(v.unix/totpStep), 8); got != v.want {
			t.Errorf("T=%d: %s, want %s", v.unix, got, v.want)
		}
	}
	// RFC 4226 appendix D, 6 digits.
	for i, want := range []string{"755224", "287082", "359152", "969429", "338314"} {
		if got := hotp(key, uint64(i), 6); got != want {
			t.Errorf("HOTP %d: %s, want %s", i, got, want)
		}
	}
}

// TestTOTPCheck covers the window and the no-reuse rule.
func TestTOTPCheck(t *testing.T) {
	secret := totpEncoding.EncodeToString([]byte("12345678901234567890"))
	now := time.Unix(1111111111, 0)
	step := now.Unix() / totpStep
	key := []byte("12345678901234567890")
	for _, d := range []int64{-1, 0, 1} {
		code := hotp(key, uint64(step+d), 6)
		if got := totpCheck(secret, code, now, 0); got != step+d {
			t.Errorf("skew %d: step %d", d, got)
		}
	}
	if got := totpCheck(secret, hotp(key, uint64(step-2), 6), now, 0); got != -1 {
		t.Errorf("two steps old accepted: %d", got)
	}
	if got := totpCheck(secret, hotp(key, uint64(step), 6), now, step); got != -1 {
		t.Errorf("a code reused: %d", got)
	}
	if got := totpCheck(secret, "12345", now, 0); got != -1 {
		t.Errorf("5 digits: %d", got)
	}
}
