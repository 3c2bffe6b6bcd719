package dmarc

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// FuzzMail ensures the MIME walker, given any input as a message, neither
// panics nor returns an unclassified error. Seeds: testdata/fuzz/FuzzMail
// (the corpus's report and failure mails) and one here.
func FuzzMail(f *testing.F) {
	gz := reportgen.Gzip(reportgen.Generate(1, 2, reportgen.Options{}))
	f.Add([]byte(mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailMultipart("xx",
		"Content-Type: text/plain\r\n\r\nhello",
		"Content-Type: application/gzip; name*0=\"a.xml\"; name*1=\".gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailB64(gz))))
	f.Fuzz(func(t *testing.T, data []byte) {
		w := &ctrWalker{lim: ctrFuzzLimits.withDefaults(), fn: ctrFuzzParse}
		w.budget, w.zipBudget = w.lim.MaxDecompressed, w.lim.MaxCompressed
		err := w.mail(bufio.NewReaderSize(bytes.NewReader(data), ctrPeekLen), "", 0)
		if err == nil && w.found == 0 {
			err = w.broken
		}
		if err != nil && !aggIsSentinel(err) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}
