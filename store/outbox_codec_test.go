package store

import (
	"bytes"
	"testing"
	"time"
)

// TestOutboxCodec ensures an outbox entry decodes to what was encoded, its
// webhook id is readable without decoding, and damaged entries are errors,
// not panics.
func TestOutboxCodec(t *testing.T) {
	due := time.Date(2026, 11, 22, 9, 30, 0, 123456789, time.UTC)
	rec := &outboxRecord{
		ID: NewID(), WebhookID: NewID(), OrgID: NewID(), AlertID: NewID(), EventID: "evt_" + NewID(),
		Attempt: 3, Due: due, CreatedAt: due.Add(-time.Minute), Body: []byte(`{"id":"evt_x","data":{}}`),
	}
	key, raw := outboxKey(rec.Due, rec.ID), appendOutbox(nil, rec)
	got, err := decodeOutbox(key, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != rec.ID || got.WebhookID != rec.WebhookID || got.OrgID != rec.OrgID || got.AlertID != rec.AlertID ||
		got.EventID != rec.EventID || got.Attempt != 3 || !got.Due.Equal(due) || !got.CreatedAt.Equal(rec.CreatedAt) ||
		!bytes.Equal(got.Body, rec.Body) {
		t.Errorf("decoded %+v, want %+v", got, rec)
	}
	if outboxWebhookID(raw) != rec.WebhookID {
		t.Errorf("outboxWebhookID = %q", outboxWebhookID(raw))
	}
	raw[len(raw)-1] = 'X' // the body is a copy: the stored bytes may change under it
	if got.Body[len(got.Body)-1] != '}' {
		t.Error("decoded body shares the stored bytes")
	}

	good := appendOutbox(nil, rec)
	for _, c := range []struct {
		name     string
		key, raw []byte
	}{
		{"Empty", key, nil},
		{"Version", key, append([]byte{9}, good[1:]...)},
		{"ShortIDs", key, good[:1+2*idLen]},
		{"EventIDTooLong", key, append(good[:1+3*idLen:1+3*idLen], 200)},
		{"NoTimes", key, good[:1+3*idLen+1+len(rec.EventID)+1+8]},
		{"ZeroAttempt", key, append(append(good[:1+3*idLen+1+len(rec.EventID):1+3*idLen+1+len(rec.EventID)], 0), make([]byte, 16)...)},
		{"ShortKey", key[:10], good},
	} {
		if _, err := decodeOutbox(c.key, c.raw); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
}
