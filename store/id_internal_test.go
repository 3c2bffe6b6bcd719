package store

import "testing"

// TestNewIDBytes ensures a draft's binary id, made with its text id, is
// the one the readers parse from the text (binID): records are keyed by it.
func TestNewIDBytes(t *testing.T) {
	for range 1000 {
		b := newIDBytes()
		got, ok := binID(formatUUID(b))
		if !ok || got != b {
			t.Fatalf("binID(formatUUID(%x)) = %x, %v", b, got, ok)
		}
	}
	db, _ := openFailureDB(t)
	d, err := db.NewReportDraft(Report{DomainID: NewID(), OrgID: NewID(), ReceivedAt: wallClock()})
	if err != nil {
		t.Fatal(err)
	}
	if bin, _ := binID(d.rep.ID); bin != d.bin {
		t.Errorf("draft %s has binary id %x, want %x", d.rep.ID, d.bin, bin)
	}
}
