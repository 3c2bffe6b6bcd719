package verify_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/webhook/verify"
)

// FuzzVerify ensures Verify never panics, accepts only what the sender's
// own signature computation produced, and rejects with one of its errors.
func FuzzVerify(f *testing.F) {
	now := int64(1767225600)
	f.Add(secret, strconv.FormatInt(now, 10), sign(secret, strconv.FormatInt(now, 10), []byte(`{}`)), []byte(`{}`), now)
	f.Add("", "", "", []byte(nil), int64(0))
	f.Add("k", "-1", "sha256=", []byte("x"), int64(-9223372036854775808))
	f.Add("k", "9223372036854775807", "sha256="+string(make([]byte, 64)), []byte("x"), int64(9223372036854775807))
	f.Fuzz(func(t *testing.T, key, ts, sig string, body []byte, nowUnix int64) {
		err := verify.Verify(key, ts, sig, body, time.Unix(nowUnix, 0))
		if err == nil {
			if !strings.HasPrefix(sig, "sha256=") || !strings.EqualFold(sig, sign(key, ts, body)) {
				t.Fatalf("accepted a signature that is not the body's: %q", sig)
			}
			return
		}
		for _, known := range []error{verify.ErrMissingTimestamp, verify.ErrBadSignatureFormat, verify.ErrTimestampOutOfRange, verify.ErrSignatureMismatch} {
			if errors.Is(err, known) {
				return
			}
		}
		t.Fatalf("unknown error %v", err)
	})
}
