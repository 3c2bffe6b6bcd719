package senders

import (
	"context"
	"reflect"
	"testing"
)

// TestSenderVolumes checks that the volumes name groups by stable keys.
func TestSenderVolumes(t *testing.T) {
	e := newViewEnv(t, "")
	e.name(t, "198.51.100.1", "mail1.mcsv.net")
	e.name(t, "203.0.113.9", "relay.example.org")
	e.name(t, "203.0.113.10", "mx.example.com")
	e.days(t, 1,
		rec("198.51.100.1", 50, "fail", "fail", "mcsv.net", ""),
		rec("203.0.113.9", 10, "fail", "fail", "", ""),
		rec("203.0.113.10", 7, "pass", "pass", "example.com", "example.com"),
		rec("100.64.0.1", 5, "fail", "fail", "", ""))
	got, err := e.v.SenderVolumes(context.Background(), e.org.ID, e.dom.ID, t0, e.to())
	if err != nil {
		t.Fatal(err)
	}
	want := []SenderVolume{
		{Key: "s:Intuit Mailchimp", Name: "Intuit Mailchimp", Type: GroupService, Messages: 50},
		{Key: "d:example.org", Name: "example.org", Type: GroupDomain, Messages: 10},
		{Key: "o:", Name: "example.com (own servers)", Type: GroupOwn, Messages: 7, DMARCPassRate: 1},
		{Key: "u:", Name: "Unidentified", Type: GroupUnknown, Messages: 5},
	}
	for i := range got {
		if len(got[i].Hints) == 0 != (got[i].DMARCPassRate == 1) {
			t.Errorf("hints of %s: %q", got[i].Name, got[i].Hints)
		}
		got[i].Hints = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("volumes %+v, want %+v", got, want)
	}
}
