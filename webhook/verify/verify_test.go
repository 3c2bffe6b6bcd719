package verify_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/webhook/verify"
)

const secret = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"

// sign is the sender's side, written out here rather than borrowed from
// package webhook, so that the two cannot share a mistake.
func sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// flipLast changes the last hex digit of a signature, keeping its length
// and format, so only the constant-time comparison can catch it.
func flipLast(sig string) string {
	last := sig[len(sig)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return sig[:len(sig)-1] + string(repl)
}

// TestVerify ensures each of the five rules accepts and rejects what it
// should, with an error naming the rule.
func TestVerify(t *testing.T) {
	now := time.Unix(1767225600, 0)
	body := []byte(`{"id":"evt_1","type":"alert.created"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	good := sign(secret, ts, body)
	at := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, c := range []struct {
		name          string
		ts, sig, body string
		secret        string
		want          error
	}{
		{"valid", ts, good, string(body), secret, nil},
		{"upper-case hex", ts, "sha256=" + strings.ToUpper(strings.TrimPrefix(good, "sha256=")), string(body), secret, nil},
		{"rule 1: 300 s old", at(-300 * time.Second), sign(secret, at(-300*time.Second), body), string(body), secret, nil},
		{"rule 1: 300 s ahead", at(300 * time.Second), sign(secret, at(300*time.Second), body), string(body), secret, nil},
		{"rule 1: 301 s old", at(-301 * time.Second), sign(secret, at(-301*time.Second), body), string(body), secret, verify.ErrTimestampOutOfRange},
		{"rule 1: 301 s ahead", at(301 * time.Second), sign(secret, at(301*time.Second), body), string(body), secret, verify.ErrTimestampOutOfRange},
		{"rule 1: epoch", "0", sign(secret, "0", body), string(body), secret, verify.ErrTimestampOutOfRange},
		{"rule 1: huge", "9223372036854775807", sign(secret, "9223372036854775807", body), string(body), secret, verify.ErrTimestampOutOfRange},
		{"rule 2: no timestamp", "", good, string(body), secret, verify.ErrMissingTimestamp},
		{"rule 2: timestamp not a number", "yesterday", good, string(body), secret, verify.ErrMissingTimestamp},
		{"rule 2: signed timestamp", "+" + ts, sign(secret, "+"+ts, body), string(body), secret, verify.ErrMissingTimestamp},
		{"rule 2: padded timestamp", " " + ts, good, string(body), secret, verify.ErrMissingTimestamp},
		{"rule 2: timestamp overflows", "99999999999999999999", good, string(body), secret, verify.ErrMissingTimestamp},
		{"rule 2: no signature", ts, "", string(body), secret, verify.ErrBadSignatureFormat},
		{"rule 2: bare hex", ts, strings.TrimPrefix(good, "sha256="), string(body), secret, verify.ErrBadSignatureFormat},
		{"rule 2: other algorithm", ts, "sha1=" + strings.TrimPrefix(good, "sha256="), string(body), secret, verify.ErrBadSignatureFormat},
		{"rule 2: upper-case prefix", ts, "SHA256=" + strings.TrimPrefix(good, "sha256="), string(body), secret, verify.ErrBadSignatureFormat},
		{"rule 2: short", ts, good[:len(good)-2], string(body), secret, verify.ErrBadSignatureFormat},
		{"rule 2: not hex", ts, good[:len(good)-1] + "g", string(body), secret, verify.ErrBadSignatureFormat},
		{"rule 3: body changed", ts, good, string(body) + "\n", secret, verify.ErrSignatureMismatch},
		{"rule 3: body re-encoded", ts, good, `{"id": "evt_1", "type": "alert.created"}`, secret, verify.ErrSignatureMismatch},
		{"rule 3: other timestamp signed", ts, sign(secret, at(-time.Second), body), string(body), secret, verify.ErrSignatureMismatch},
		{"rule 3: other secret", ts, good, string(body), secret + "x", verify.ErrSignatureMismatch},
		{"rule 4: last digit differs", ts, flipLast(good), string(body), secret, verify.ErrSignatureMismatch},
	} {
		err := verify.Verify(c.secret, c.ts, c.sig, []byte(c.body), now)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "verify: ") {
			t.Errorf("%s: error %q lacks the package prefix", c.name, err)
		}
	}
}

// TestVerifyRequest ensures the raw body comes back only after the checks
// pass (rule 5), and oversized bodies are refused.
func TestVerifyRequest(t *testing.T) {
	now := time.Now()
	body := []byte(`{"id":"evt_1"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	req := func(sig string, body []byte) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		r.Header.Set("X-Webhook-Timestamp", ts)
		r.Header.Set("X-Webhook-Signature", sig)
		return r
	}
	got, err := verify.VerifyRequest(secret, req(sign(secret, ts, body), body), 1024, now)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("VerifyRequest = %q, %v", got, err)
	}
	got, err = verify.VerifyRequest(secret, req(flipLast(sign(secret, ts, body)), body), 1024, now)
	if !errors.Is(err, verify.ErrSignatureMismatch) || got != nil {
		t.Errorf("tampered: %q, %v; want nil body and ErrSignatureMismatch", got, err)
	}
	got, err = verify.VerifyRequest(secret, req(sign(secret, ts, body), body), int64(len(body)-1), now)
	if !errors.Is(err, verify.ErrBodyTooLarge) || got != nil {
		t.Errorf("oversized: %q, %v; want ErrBodyTooLarge", got, err)
	}
	got, err = verify.VerifyRequest(secret, req(sign(secret, ts, body), body), int64(len(body)), now)
	if err != nil || !bytes.Equal(got, body) {
		t.Errorf("body of exactly the limit: %q, %v", got, err)
	}
	r := req(sign(secret, ts, body), body)
	r.Header.Del("X-Webhook-Timestamp")
	if _, err := verify.VerifyRequest(secret, r, 1024, now); !errors.Is(err, verify.ErrMissingTimestamp) {
		t.Errorf("no timestamp header: %v", err)
	}
}
