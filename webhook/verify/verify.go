// Package verify checks, on the receiving side, that a webhook delivery
// came from dmarcd and is fresh. It follows the five rules of the API
// specification:
//
//  1. reject when X-Webhook-Timestamp is more than 300 s from now;
//  2. reject when the timestamp is missing or the signature does not start
//     with "sha256=";
//  3. recompute HMAC-SHA256(secret, "<timestamp>.<raw body>") over the raw,
//     unparsed body bytes;
//  4. compare in constant time;
//  5. parse the body only after the checks pass.
//
// It depends on the standard library only, so receivers written in Go can
// import it on its own:
//
//	func handle(w http.ResponseWriter, r *http.Request) {
//		body, err := verify.VerifyRequest(secret, r, 1<<20, time.Now())
//		if err != nil {
//			http.Error(w, "invalid signature", http.StatusUnauthorized)
//			return
//		}
//		var ev struct{ ID, Type string } // rule 5: parse only now
//		_ = json.Unmarshal(body, &ev)
//		w.WriteHeader(http.StatusNoContent)
//	}
package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Tolerance is the largest accepted difference between a delivery's
// timestamp and the receiver's clock, either way.
const Tolerance = 300 * time.Second

// Headers carrying the timestamp and the signature.
const (
	HeaderTimestamp = "X-Webhook-Timestamp"
	HeaderSignature = "X-Webhook-Signature"
)

const prefix = "sha256="

// The reasons a delivery is rejected; Verify and VerifyRequest wrap them.
var (
	// ErrMissingTimestamp: the timestamp is missing or is not decimal Unix seconds.
	ErrMissingTimestamp = errors.New("verify: X-Webhook-Timestamp missing or not Unix seconds")
	// ErrBadSignatureFormat: the signature does not start with "sha256=" or
	// is not 64 hex digits after it.
	ErrBadSignatureFormat = errors.New("verify: X-Webhook-Signature is not sha256= followed by 64 hex digits")
	// ErrTimestampOutOfRange: the timestamp is more than Tolerance away from now
	// (a replayed or badly delayed delivery, or a wrong clock).
	ErrTimestampOutOfRange = errors.New("verify: X-Webhook-Timestamp is more than 300 s from now")
	// ErrSignatureMismatch: the signature is not that of this body and
	// timestamp with this secret.
	ErrSignatureMismatch = errors.New("verify: signature does not match")
	// ErrBodyTooLarge: VerifyRequest met a body over its limit.
	ErrBodyTooLarge = errors.New("verify: body too large")
)

// Verify checks one delivery: the X-Webhook-Timestamp and
// X-Webhook-Signature header values and the raw body, against secret at
// time now. It returns nil for a genuine, fresh delivery, else an error
// wrapping ErrMissingTimestamp, ErrBadSignatureFormat,
// ErrTimestampOutOfRange or ErrSignatureMismatch.
func Verify(secret string, timestamp, signature string, body []byte, now time.Time) error {
	ts, err := parseTimestamp(timestamp)
	if err != nil {
		return err
	}
	got, err := parseSignature(signature)
	if err != nil {
		return err
	}
	if off, future := distance(ts, now.Unix()); off > uint64(Tolerance/time.Second) {
		when := "in the past"
		if future {
			when = "in the future"
		}
		return fmt.Errorf("%w: it is %d s %s", ErrTimestampOutOfRange, off, when)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), got) {
		return ErrSignatureMismatch
	}
	return nil
}

// distance returns |ts - now| without overflow, and whether ts is later.
// For a >= b, the unsigned difference of two int64s is exact.
func distance(ts, now int64) (off uint64, future bool) {
	if ts >= now {
		return uint64(ts) - uint64(now), ts > now
	}
	return uint64(now) - uint64(ts), false
}

// parseTimestamp accepts only decimal digits: the header value is signed as
// sent, so a lenient reading would admit spellings the sender never makes.
func parseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, ErrMissingTimestamp
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrMissingTimestamp
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrMissingTimestamp
	}
	return ts, nil
}

func parseSignature(s string) ([]byte, error) {
	h, ok := strings.CutPrefix(s, prefix)
	if !ok || len(h) != hex.EncodedLen(sha256.Size) {
		return nil, ErrBadSignatureFormat
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil, ErrBadSignatureFormat
	}
	return b, nil
}

// VerifyRequest reads r's body, at most maxBody bytes, and verifies it with
// the request's headers as Verify does. It returns the raw body, to be
// parsed only now, or nil and an error wrapping one of Verify's errors,
// ErrBodyTooLarge, or the read error.
func VerifyRequest(secret string, r *http.Request, maxBody int64, now time.Time) ([]byte, error) {
	ts, sig := r.Header.Get(HeaderTimestamp), r.Header.Get(HeaderSignature)
	if _, err := parseTimestamp(ts); err != nil {
		return nil, err
	}
	if _, err := parseSignature(sig); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("verify: read body: %w", err)
	}
	if int64(len(body)) > maxBody {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, maxBody)
	}
	if err := Verify(secret, ts, sig, body, now); err != nil {
		return nil, err
	}
	return body, nil
}
