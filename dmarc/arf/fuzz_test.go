package arf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// failFuzzLimits keep each fuzz iteration small.
var failFuzzLimits = container.Limits{MaxCompressed: 1 << 20}

// FuzzFailure ensures Extract, on any input, neither panics
// nor returns an unclassified error, returns reports xor an error, and
// keeps what it returns within its bounds. Seeds: every failure sample of
// the corpus, synthetic shapes here, and testdata/fuzz/FuzzFailure.
func FuzzFailure(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(failCorpusDir, "*.eml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no corpus samples: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(failReportMail(failPlainPart, failFBPart, failOrigPart)))
	f.Add([]byte(failReportMail("Content-Type: message/feedback-report\r\nContent-Transfer-Encoding: base64\r\n\r\n"+failB64(failARF),
		"Content-Type: text/rfc822-headers\r\n\r\n"+strings.Split(failOrig, "\r\n\r\n")[0])))
	f.Add([]byte("Subject: DMARC failure\r\n\r\nSender IP Address: 192.0.2.1\r\n\r\nReceived: from x\r\nFrom: a@b\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		reps, err := Extract(bytes.NewReader(data), failFuzzLimits)
		if err != nil {
			if reps != nil || !failIsSentinel(err) && !errors.Is(err, ErrNotFailureReport) {
				t.Fatalf("reports %v with error %v", reps, err)
			}
			return
		}
		if len(reps) == 0 || len(reps) > failMaxItems {
			t.Fatalf("%d reports and no error", len(reps))
		}
		for _, r := range reps {
			if r.FeedbackType != "auth-failure" || len(r.Headers) > container.MaxFields {
				t.Fatalf("report %+v", r)
			}
		}
	})
}

// failIsSentinel reports whether err wraps one of container's sentinels.
func failIsSentinel(err error) bool {
	return errors.Is(err, container.ErrNoReport) || errors.Is(err, container.ErrMalformed) || errors.Is(err, container.ErrTooLarge)
}
