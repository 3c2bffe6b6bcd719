package aggregate

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// TestExtractMailWithoutClosingBoundary ensures a mail whose last MIME
// boundary is missing, but whose attachment is whole, yields its report
// (it was quarantined with "multipart: NextPart: EOF"), gzip and plain
// XML alike, with CR LF or LF line ends.
func TestExtractMailWithoutClosingBoundary(t *testing.T) {
	xml := reportgen.Generate(3, 20, reportgen.Options{})
	for _, tc := range []struct {
		name   string
		ctype  string
		body   []byte
		eol    string
		ending string // what follows the attachment's last line
	}{
		{"gzip crlf", "application/gzip", reportgen.Gzip(xml), "\r\n", ""},
		{"gzip lf", "application/gzip", reportgen.Gzip(xml), "\n", ""},
		{"xml no final eol", "text/xml", xml, "\r\n", "-"},
		{"gzip blank line", "application/gzip", reportgen.Gzip(xml), "\r\n", "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			eol := tc.eol
			b.WriteString("From: r@sender.test" + eol + "Subject: Report domain: example.com" + eol + "MIME-Version: 1.0" + eol)
			b.WriteString("Content-Type: multipart/mixed; boundary=\"XyZ\"" + eol + eol)
			b.WriteString("--XyZ" + eol + "Content-Type: text/plain" + eol + eol + "A DMARC report." + eol)
			b.WriteString("--XyZ" + eol + "Content-Type: " + tc.ctype + "; name=\"r\"" + eol + "Content-Transfer-Encoding: base64" + eol + eol)
			enc := base64.StdEncoding.EncodeToString(tc.body)
			var lines []string
			for len(enc) > 76 {
				lines = append(lines, enc[:76])
				enc = enc[76:]
			}
			lines = append(lines, enc)
			b.WriteString(strings.Join(lines, eol))
			if tc.ending != "-" {
				b.WriteString(eol + tc.ending)
			}
			got, err := ctrExtract(&b, container.Limits{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if len(got) != 1 || !bytes.Equal(got[0].body, xml) {
				t.Fatalf("got %d payloads, want the whole report", len(got))
			}
		})
	}
}
