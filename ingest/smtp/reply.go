package smtp

import (
	"fmt"
	"strings"

	"github.com/emersion/go-smtp"

	"github.com/dmarcd/dmarcd/ingest"
)

// tally counts what one message's ingests did, by kind, for the 250 reply
// text (the sender's logs show it: "2.0.0 Stored: 1 TLS report").
type tally struct {
	stored, dups map[ingest.Kind]int
	quarantined  int
}

func (t *tally) add(res *ingest.Result) {
	if t.stored == nil {
		t.stored, t.dups = map[ingest.Kind]int{}, map[ingest.Kind]int{}
	}
	for _, o := range res.Reports {
		if o.Duplicate {
			t.dups[o.Kind]++
		} else {
			t.stored[o.Kind]++
		}
	}
	if res.Quarantined != "" {
		t.quarantined++
	}
}

// reply is the 250 answer naming what was stored.
func (t *tally) reply() *smtp.SMTPError {
	var parts []string
	if s := kinds(t.stored); s != "" {
		parts = append(parts, "stored "+s)
	}
	if s := kinds(t.dups); s != "" {
		parts = append(parts, "already stored "+s)
	}
	if t.quarantined > 0 {
		parts = append(parts, "kept in quarantine")
	}
	msg := "OK"
	if len(parts) > 0 {
		msg = "OK: " + strings.Join(parts, "; ")
	}
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: msg}
}

// kinds words counts by kind: "1 aggregate report, 2 TLS reports".
func kinds(m map[ingest.Kind]int) string {
	var out []string
	for _, k := range []ingest.Kind{ingest.KindAggregate, ingest.KindFailure, ingest.KindTLS} {
		n := m[k]
		if n == 0 {
			continue
		}
		name := map[ingest.Kind]string{ingest.KindAggregate: "aggregate report", ingest.KindFailure: "failure report", ingest.KindTLS: "TLS report"}[k]
		if n > 1 {
			name += "s"
		}
		out = append(out, fmt.Sprintf("%d %s", n, name))
	}
	return strings.Join(out, ", ")
}
