package smtp

import (
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/ingest"
)

// TestLineGuard ensures the guard bounds command lines, lets message lines
// (after DATA with a recipient, up to "."; a BDAT chunk) be long, follows
// the protocol across reads split anywhere, and stops after STARTTLS.
func TestLineGuard(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, tc := range []struct {
		name   string
		in     string
		rcptOK bool
		tls    bool
		want   bool
	}{
		{"short commands", "EHLO a\r\nMAIL FROM:<a@b>\r\n", false, false, true},
		{"long command", "NOOP " + long + "\r\n", false, false, false},
		{"long command without end", "NOOP " + long, false, false, false},
		{"message line", "DATA\r\n" + long + "\r\n.\r\n", true, false, true},
		{"long command after the message", "DATA\r\nhi\r\n.\r\nNOOP " + long + "\r\n", true, false, false},
		{"DATA refused: no recipient", "DATA\r\n" + long + "\r\n", false, false, false},
		{"dot-stuffed line is not the end", "DATA\r\n..\r\n" + long + "\r\n", true, false, true},
		{"BDAT chunk", "BDAT 200 LAST\r\n" + long + "NOOP\r\n", true, false, true},
		{"after the BDAT chunk", "BDAT 10\r\n" + long[:10] + "NOOP " + long + "\r\n", true, false, false},
		{"STARTTLS with TLS", "STARTTLS\r\n" + long, false, true, true},
		{"STARTTLS without TLS", "STARTTLS\r\n" + long, false, false, false},
		{"over the message limit", "DATA\r\n" + strings.Repeat(long, 10) + "\r\n", true, false, false},
	} {
		for _, split := range []int{1, 7, 1 << 20} {
			g := lineGuard{cmdMax: 100, dataMax: 1000, tls: tc.tls}
			ok := true
			for in := tc.in; in != "" && ok; {
				n := min(split, len(in))
				ok = g.scan([]byte(in[:n]), tc.rcptOK)
				in = in[n:]
			}
			if ok != tc.want {
				t.Errorf("%s (reads of %d): %v, want %v", tc.name, split, ok, tc.want)
			}
		}
	}
}

// TestTally ensures the 250 text names what was done, in one printable line.
func TestTally(t *testing.T) {
	agg := func(dup bool) ingest.Outcome { return ingest.Outcome{Kind: ingest.KindAggregate, Duplicate: dup} }
	for _, tc := range []struct {
		res  []*ingest.Result
		want string
	}{
		{[]*ingest.Result{{Reports: []ingest.Outcome{agg(false)}}}, "stored: 1 aggregate report"},
		{[]*ingest.Result{{Reports: []ingest.Outcome{}, Expired: []ingest.Expired{{Kind: ingest.KindAggregate}}}},
			"not stored: 1 report older than the retention window"},
		{[]*ingest.Result{{Reports: []ingest.Outcome{agg(false), agg(false), {Kind: ingest.KindFailure}}}}, "stored: 2 aggregate reports, 1 failure report"},
		{[]*ingest.Result{{Reports: []ingest.Outcome{agg(false)}, RecordsSkipped: 3}, {Reports: []ingest.Outcome{agg(true)}}},
			"stored: 1 aggregate report; already stored: 1 aggregate report (3 records skipped)"},
		{[]*ingest.Result{{Quarantined: "id", Reason: "no report\r\n250 fake"}}, "kept for review: no report  250 fake"},
		{[]*ingest.Result{{}}, "accepted"},
	} {
		var s tally
		for _, r := range tc.res {
			s.add(r)
		}
		if got := s.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	var s tally
	s.add(&ingest.Result{Quarantined: "id", Reason: strings.Repeat("é", 400)})
	if got := s.String(); len(got) > 400 || strings.ContainsFunc(got, func(r rune) bool { return r > 0x7e }) {
		t.Errorf("long reason: %d bytes %q", len(got), got[:20])
	}
}
