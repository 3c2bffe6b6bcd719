package smtp

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/dmarcd/dmarcd/ingest"
)

// tally sums the outcomes of one message over its recipients, for the
// text of the 250 reply.
type tally struct {
	stored, dups map[ingest.Kind]int
	quarantined  []string // reasons
	skipped      int
	expired      int // reports older than the retention window, not stored
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
		t.quarantined = append(t.quarantined, res.Reason)
	}
	t.skipped += res.RecordsSkipped
	if res.Quarantined == "" {
		t.expired += len(res.Expired)
	}
}

// String says what happened, on one line: "stored: 1 aggregate report",
// "already stored: 2 aggregate reports", "stored: 1 failure report (3
// records skipped)", "kept for review: no DMARC or TLS report in the input".
func (t *tally) String() string {
	var parts []string
	if s := kinds(t.stored); s != "" {
		parts = append(parts, "stored: "+s)
	}
	if s := kinds(t.dups); s != "" {
		parts = append(parts, "already stored: "+s)
	}
	if len(t.quarantined) > 0 {
		parts = append(parts, "kept for review: "+t.quarantined[0])
	}
	if t.expired > 0 {
		parts = append(parts, "not stored: "+plural(t.expired, "report")+" older than the retention window")
	}
	msg := strings.Join(parts, "; ")
	if msg == "" {
		msg = "accepted"
	}
	if t.skipped > 0 {
		msg += " (" + plural(t.skipped, "record") + " skipped)"
	}
	return oneLine(msg, 400)
}

// kindNames are the words of the reply for each kind of report.
var kindNames = map[ingest.Kind]string{ingest.KindAggregate: "aggregate report",
	ingest.KindFailure: "failure report", ingest.KindTLS: "TLS report"}

// kinds words counts by kind: "1 aggregate report, 2 TLS reports".
func kinds(m map[ingest.Kind]int) string {
	var out []string
	for _, k := range []ingest.Kind{ingest.KindAggregate, ingest.KindFailure, ingest.KindTLS} {
		if n := m[k]; n > 0 {
			out = append(out, plural(n, kindNames[k]))
		}
	}
	return strings.Join(out, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// oneLine makes s safe as the text of one reply line: printable ASCII,
// at most max bytes.
func oneLine(s string, max int) string {
	var b bytes.Buffer
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			r = ' '
		}
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) > max {
		out = out[:max-3] + "..."
	}
	return out
}

// lineGuard bounds the lines a client sends on the plaintext of a
// connection: a command line to cmdMax bytes, a message line (after DATA
// with a recipient accepted, up to the lone "." line; or a BDAT chunk) to
// dataMax. It follows the protocol on the bytes read, so go-smtp's
// read-ahead does not matter. After STARTTLS (when tls is offered) it sees
// only ciphertext and stops; go-smtp's own limit (dataMax) remains.
type lineGuard struct {
	cmdMax, dataMax int64
	tls             bool

	lineLen  int64
	head     [32]byte
	headLen  int
	inData   bool  // after DATA, until the "." line
	bdatLeft int64 // bytes of a BDAT chunk still to come
	off      bool
}

// scan accounts for b; false means a line is over its limit.
func (g *lineGuard) scan(b []byte, rcptOK bool) bool {
	for len(b) > 0 && !g.off {
		if g.bdatLeft > 0 {
			k := min(int64(len(b)), g.bdatLeft)
			g.bdatLeft -= k
			b = b[k:]
			continue
		}
		seg := b
		i := bytes.IndexByte(b, '\n')
		if i >= 0 {
			seg = b[:i]
		}
		if g.headLen < len(g.head) {
			g.headLen += copy(g.head[g.headLen:], seg)
		}
		g.lineLen += int64(len(seg))
		limit := g.cmdMax
		if g.inData && rcptOK {
			limit = g.dataMax
		}
		if g.lineLen > limit {
			return false
		}
		if i < 0 {
			return true
		}
		g.endLine(rcptOK)
		b = b[i+1:]
	}
	return true
}

// endLine follows the protocol at the end of a line. A DATA that go-smtp
// refused (no recipient accepted) ends message mode at the next line.
func (g *lineGuard) endLine(rcptOK bool) {
	whole := g.lineLen <= int64(len(g.head))
	line := strings.ToUpper(strings.TrimRight(string(g.head[:g.headLen]), "\r"))
	g.lineLen, g.headLen = 0, 0
	switch {
	case g.inData:
		if !rcptOK || whole && line == "." {
			g.inData = false
		}
	case whole && line == "DATA":
		g.inData = true
	case whole && line == "STARTTLS" && g.tls:
		g.off = true
	case strings.HasPrefix(line, "BDAT "):
		f := strings.Fields(line)
		var n int64
		if len(f) >= 2 {
			_, _ = fmt.Sscan(f[1], &n)
		}
		g.bdatLeft = min(max(n, 0), g.dataMax)
	}
}
