package aggregate

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// TestReleaseKeepsWhatWasRead ensures a released Reader's buffers, taken
// by the next Readers, change nothing the first one returned: its header
// and records still equal a fresh parse of the same report. A Reader used
// after Release fails instead of reading someone else's buffer.
func TestReleaseKeepsWhatWasRead(t *testing.T) {
	first := reportgen.Generate(1, 40, reportgen.Options{})
	wantH, wantRecs, err := Parse(bytes.NewReader(first), container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewReader(bytes.NewReader(first), container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var got []*Record
	for {
		r, err := a.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	h := a.Header()
	a.Release()
	a.Release() // twice is harmless
	if _, err := a.Next(); !errors.Is(err, errReleased) {
		t.Errorf("Next after Release: %v", err)
	}
	// Other reports through the same buffers, one with a large token.
	for i := range 4 {
		other := reportgen.Generate(int64(100+i), 60, reportgen.Options{OrgName: string(bytes.Repeat([]byte("x"), 3000*i+1))})
		if _, _, err := Parse(bytes.NewReader(other), container.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(h, wantH) {
		t.Errorf("header changed after Release:\n got %+v\nwant %+v", h, wantH)
	}
	if len(got) != len(wantRecs) {
		t.Fatalf("%d records, want %d", len(got), len(wantRecs))
	}
	for i := range got {
		if !reflect.DeepEqual(*got[i], wantRecs[i]) {
			t.Fatalf("record %d changed after Release:\n got %+v\nwant %+v", i, *got[i], wantRecs[i])
		}
	}
}
