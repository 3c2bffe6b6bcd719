package store

import (
	"bytes"
	"testing"
	"time"
)

// TestOutboxCodec ensures an outbox entry decodes to what was encoded, its
// webhook id is readable without decoding, an entry of version 1 (the whole
// body stored) decodes to the alert of its body, and damaged entries are
// errors, not panics.
func TestOutboxCodec(t *testing.T) {
	due := time.Date(2026, 11, 22, 9, 30, 0, 123456789, time.UTC)
	rec := &outboxRecord{
		ID: NewID(), WebhookID: NewID(), OrgID: NewID(), AlertID: NewID(), EventID: "evt_" + NewID(),
		Attempt: 3, Due: due, CreatedAt: due.Add(-time.Minute), Alert: []byte(`{"id":"a-1","details":{}}`),
	}
	key, raw := outboxKey(rec.Due, rec.ID), appendOutbox(nil, rec)
	got, err := decodeOutbox(key, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != rec.ID || got.WebhookID != rec.WebhookID || got.OrgID != rec.OrgID || got.AlertID != rec.AlertID ||
		got.EventID != rec.EventID || got.Attempt != 3 || !got.Due.Equal(due) || !got.CreatedAt.Equal(rec.CreatedAt) ||
		!bytes.Equal(got.Alert, rec.Alert) {
		t.Errorf("decoded %+v, want %+v", got, rec)
	}
	if outboxWebhookID(raw) != rec.WebhookID {
		t.Errorf("outboxWebhookID = %q", outboxWebhookID(raw))
	}
	raw[len(raw)-1] = 'X' // the alert is a copy: the stored bytes may change under it
	if got.Alert[len(got.Alert)-1] != '}' {
		t.Error("decoded alert shares the stored bytes")
	}

	// Version 1: the same layout, then the whole body.
	v1 := func(body string) []byte {
		old := appendOutbox(nil, rec)
		old[0] = 1
		return append(old[:len(old)-len(rec.Alert)], body...)
	}
	old := v1(`{"id":"` + rec.EventID + `","type":"alert.created","created_at":"2026-11-22T09:29:00Z","test":false,` +
		`"organization_id":"` + rec.OrgID + `","data":{"alert":{"id":"a-1","details":{}}}}`)
	if got, err := decodeOutbox(key, old); err != nil || !bytes.Equal(got.Alert, rec.Alert) || got.EventID != rec.EventID ||
		!got.CreatedAt.Equal(rec.CreatedAt) {
		t.Errorf("version 1 decoded %+v, %v", got, err)
	}
	if outboxWebhookID(old) != rec.WebhookID {
		t.Errorf("outboxWebhookID of version 1 = %q", outboxWebhookID(old))
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
		{"Version1NotJSON", key, v1(`{"data":`)},
		{"Version1NoAlert", key, v1(`{"data":{}}`)},
	} {
		if _, err := decodeOutbox(c.key, c.raw); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
}
