package tlsrpt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse ensures ParseBytes, on any input, never panics, returns a
// report xor an error, classifies every error as ErrMalformed, and returns
// only reports within the schema's bounds. Seeds: testdata/*.json and
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	if len(files) == 0 {
		f.Fatal("no seed reports")
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	lim := Limits{MaxBytes: 1 << 20, MaxArray: 100, MaxFailures: 200}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(bytes.NewReader(data), lim)
		if err != nil {
			if r != nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("report %v with error %v", r, err)
			}
			return
		}
		if r.OrganizationName == "" || r.ReportID == "" || r.DateEnd.Before(r.DateBegin) {
			t.Fatalf("report %+v", r)
		}
		n := 0
		for _, p := range r.Policies {
			switch p.Type {
			case PolicySTS, PolicyTLSA, PolicyNoPolicyFound:
			default:
				t.Fatalf("policy type %q", p.Type)
			}
			if p.SuccessfulSessions < 0 || p.FailedSessions < 0 || p.SuccessfulSessions > MaxCount || p.FailedSessions > MaxCount {
				t.Fatalf("counts %+v", p)
			}
			for _, fd := range p.Failures {
				if fd.ResultType == "" || fd.FailedSessions < 0 || fd.FailedSessions > MaxCount {
					t.Fatalf("failure %+v", fd)
				}
			}
			n += len(p.Failures)
		}
		if n > lim.MaxFailures {
			t.Fatalf("%d failures", n)
		}
		if !LooksLikeTLSReport(data) {
			// Every report read must also be recognized by content, or the
			// intake would never route it here.
			t.Fatalf("parsed but not recognized: %q", data)
		}
	})
}
