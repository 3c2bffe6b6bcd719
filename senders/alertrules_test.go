package senders

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestNewSenderCandidates checks the new_sender decision: services and
// base domains only, new ones only, from 1 % of the window's mail (the
// edge included), none during the baseline week.
func TestNewSenderCandidates(t *testing.T) {
	first := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	current := []SenderVolume{
		{Key: "s:Google Workspace", Name: "Google Workspace", Type: GroupService, Messages: 9000},
		{Key: "s:Intuit Mailchimp", Name: "Intuit Mailchimp", Type: GroupService, Messages: 100}, // exactly 1 %
		{Key: "d:example.org", Name: "example.org", Type: GroupDomain, Messages: 500},
		{Key: "d:tiny.example", Name: "tiny.example", Type: GroupDomain, Messages: 99}, // under 1 %
		{Key: "a:64496", Name: "AS64496 Spoof Net", Type: GroupAS, Messages: 300},      // no name: never
		{Key: "u:", Name: "unknown", Type: GroupUnknown, Messages: 1},
	}
	before := map[string]bool{"s:Google Workspace": true}
	got := NewSenderCandidates(first, first.AddDate(0, 0, 7), current, before, NewSenderShare)
	want := []SenderVolume{current[2], current[1]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates %+v, want %+v", got, want)
	}
	if got := NewSenderCandidates(first, first.AddDate(0, 0, 7).Add(-time.Second), current, before, NewSenderShare); got != nil {
		t.Errorf("during the baseline week: %+v", got)
	}
	if got := NewSenderCandidates(time.Time{}, first, current, before, NewSenderShare); got != nil {
		t.Errorf("without a first report: %+v", got)
	}
	if got := NewSenderCandidates(first, first.AddDate(0, 1, 0), nil, before, NewSenderShare); got != nil {
		t.Errorf("no mail: %+v", got)
	}
}

// TestStageChanged checks the policy_ready decision.
func TestStageChanged(t *testing.T) {
	for _, c := range []struct {
		old, now string
		want     bool
	}{
		{StageFixSenders, StageReadyForQuarantine, true},
		{StageNotEnoughData, StageReadyForQuarantine, true},
		{StageReadyForQuarantine, StageReadyForReject, true},
		{StageReadyForQuarantine, StageReadyForQuarantine, false},
		{StageReadyForReject, StageFixSenders, false},
		{StageReadyForReject, StageEnforced, false},
		{"", StageReadyForQuarantine, false},
		{StageNoRecord, StageNotEnoughData, false},
	} {
		if got := StageChanged(c.old, c.now); got != c.want {
			t.Errorf("StageChanged(%q, %q) = %v", c.old, c.now, got)
		}
	}
}

// TestSenderVolumes checks that the volumes name groups by stable keys.
func TestSenderVolumes(t *testing.T) {
	e := newViewEnv(t, "")
	e.name(t, "198.51.100.1", "mail1.mcsv.net")
	e.name(t, "203.0.113.9", "relay.example.org")
	e.days(t, 1,
		rec("198.51.100.1", 50, "fail", "fail", "mcsv.net", ""),
		rec("203.0.113.9", 10, "pass", "pass", "example.com", "example.com"),
		rec("100.64.0.1", 5, "fail", "fail", "", ""))
	got, err := e.v.SenderVolumes(context.Background(), e.org.ID, e.dom.ID, t0, e.to())
	if err != nil {
		t.Fatal(err)
	}
	want := []SenderVolume{
		{Key: "s:Intuit Mailchimp", Name: "Intuit Mailchimp", Type: GroupService, Messages: 50},
		{Key: "d:example.org", Name: "example.org", Type: GroupDomain, Messages: 10},
		{Key: "u:", Name: "unknown", Type: GroupUnknown, Messages: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("volumes %+v, want %+v", got, want)
	}
}
