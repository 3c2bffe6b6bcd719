package container

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/dmarcd/dmarcd/internal/mailtest"
)

// FuzzMail ensures MIMEWalker, given any input as a message, neither
// panics nor returns an unclassified error, and that what it hands over
// holds together: parts in order of depth bounds, bodies readable to
// their end or to a classified error. Seeds: testdata/fuzz/FuzzMail (the
// corpus's report and failure mails) and one here.
func FuzzMail(f *testing.F) {
	f.Add([]byte(mimeHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx",
		"Content-Type: text/plain\r\n\r\nhello",
		"Content-Type: application/gzip; name*0=\"a.xml\"; name*1=\".gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\nH4sIAAAAAAAA/w==\r\n",
		"Content-Type: message/rfc822\r\n\r\nFrom: a@b\r\nContent-Type: text/rfc822-headers\r\n\r\nSubject: x\r\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxCompressed: 1 << 20}
		var w *MIMEWalker
		w = NewMIMEWalker(lim, func(p *Part) error {
			if p.Depth > lim.WithDefaults().MaxDepth || p.Message == nil {
				t.Fatalf("part %+v", p)
			}
			if p.Embedded != nil {
				if err := p.Walk(); err != nil {
					return err
				}
			}
			_, err := io.Copy(io.Discard, p.Body)
			return w.Check("part body", err)
		})
		err := w.Walk(bytes.NewReader(data), "mail")
		if err == nil {
			err = w.Broken()
		}
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("unclassified error: %v", err)
		}
		if w.Top() == nil && err == nil {
			t.Fatal("no top header and no error")
		}
	})
}
