// Package webhook signs dmarcd's events, builds their envelope and makes
// one delivery attempt to a customer's HTTPS endpoint. The attempt goes
// through internal/egress, which keeps it from being steered at internal
// hosts (SSRF): URLs are validated when a webhook is saved
// (egress.ValidateURL), and every address actually dialled is checked
// again at connection time, so a DNS answer that changes in between
// (rebinding) reaches nothing internal.
//
// Retries, the outbox and auto-disable belong to worker and store; this
// package knows one attempt only. Receivers verify deliveries with the
// separate, importable package webhook/verify.
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// UserAgent is the User-Agent header of every delivery.
const UserAgent = "dmarcd-Webhooks/1.0"

// TypeAlertCreated is the only event type dmarcd emits.
const TypeAlertCreated = "alert.created"

// Header names of a delivery (SPEC.md, Events; X-Webhook-Id from API.md).
const (
	HeaderTimestamp = "X-Webhook-Timestamp"
	HeaderSignature = "X-Webhook-Signature"
	HeaderID        = "X-Webhook-Id"
)

// SignaturePrefix starts every X-Webhook-Signature value.
const SignaturePrefix = "sha256="

// Sign returns the X-Webhook-Signature value for body sent at timestamp:
// "sha256=" + hex(HMAC-SHA256(secret, "<timestamp>.<body>")).
func Sign(secret string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	var ts [20]byte
	mac.Write(strconv.AppendInt(ts[:0], timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	var sum [sha256.Size]byte
	out := make([]byte, len(SignaturePrefix)+hex.EncodedLen(sha256.Size))
	copy(out, SignaturePrefix)
	hex.Encode(out[len(SignaturePrefix):], mac.Sum(sum[:0]))
	return string(out)
}

// NewSecret returns a new webhook signing secret: "whsec_" followed by 64
// lowercase hex characters (256 random bits).
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it aborts the program instead)
	return "whsec_" + hex.EncodeToString(b[:])
}

// Event is the body of every delivery (API.md, Delivery): this package is
// the one place it is built, for the deliveries of the outbox and for test
// deliveries alike. Data holds
// {"alert": {...the alert object...}}. It marshals created_at as RFC 3339 in
// UTC with second precision, like every timestamp of the API.
type Event struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	CreatedAt      time.Time       `json:"created_at"`
	Test           bool            `json:"test"`
	OrganizationID string          `json:"organization_id"`
	Data           json.RawMessage `json:"data"`
}

// MarshalJSON encodes e with created_at in the API's timestamp form.
func (e Event) MarshalJSON() ([]byte, error) {
	type wire struct {
		ID             string          `json:"id"`
		Type           string          `json:"type"`
		CreatedAt      string          `json:"created_at"`
		Test           bool            `json:"test"`
		OrganizationID string          `json:"organization_id"`
		Data           json.RawMessage `json:"data"`
	}
	return json.Marshal(wire{
		ID: e.ID, Type: e.Type, CreatedAt: e.CreatedAt.UTC().Format(time.RFC3339),
		Test: e.Test, OrganizationID: e.OrganizationID, Data: e.Data,
	})
}

// NewAlertEvent returns the alert.created event id of the organization,
// its data {"alert": alert}. The id is the caller's ("evt_" and a UUID:
// store.NewEventID), the same on every attempt of a delivery. It returns an
// error when alert does not marshal to a JSON object.
func NewAlertEvent(id, organizationID string, alert any, createdAt time.Time, test bool) (*Event, error) {
	a, err := json.Marshal(alert)
	if err != nil {
		return nil, fmt.Errorf("webhook: encode alert: %w", err)
	}
	if !isObject(a) {
		return nil, errors.New("webhook: the alert must encode to a JSON object")
	}
	data, err := json.Marshal(map[string]json.RawMessage{"alert": a})
	if err != nil {
		return nil, fmt.Errorf("webhook: encode event data: %w", err)
	}
	return &Event{
		ID: id, Type: TypeAlertCreated, CreatedAt: createdAt.UTC().Truncate(time.Second),
		Test: test, OrganizationID: organizationID, Data: data,
	}, nil
}

// Encode checks ev and marshals it: the exact bytes to send and sign. It
// returns an error for a nil event, an id not starting "evt_", an empty
// type or organization, or data that is not a JSON object.
func Encode(ev *Event) ([]byte, error) {
	switch {
	case ev == nil:
		return nil, errors.New("webhook: nil event")
	case !strings.HasPrefix(ev.ID, "evt_"):
		return nil, fmt.Errorf("webhook: event id %q does not start with evt_", ev.ID)
	case ev.Type == "":
		return nil, errors.New("webhook: event has no type")
	case ev.OrganizationID == "":
		return nil, errors.New("webhook: event has no organization")
	case !isObject(ev.Data):
		return nil, errors.New("webhook: event data is not a JSON object")
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("webhook: encode event: %w", err)
	}
	return body, nil
}

// isObject reports whether b is valid JSON whose value is an object.
func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
