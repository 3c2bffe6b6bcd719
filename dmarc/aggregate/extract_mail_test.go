package aggregate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime/quotedprintable"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

func mailQP(b []byte) string {
	var buf bytes.Buffer
	w := quotedprintable.NewWriter(&buf)
	w.Binary = true // keep the report's LF line ends byte for byte
	w.Write(b)
	w.Close()
	return buf.String()
}

const mailHead = "From: noreply-dmarc-support@google.com\r\nTo: dmarc@reports.example.net\r\n" +
	"Subject: Report domain: example.com Submitter: google.com\r\nMIME-Version: 1.0\r\n"

// TestExtractMail ensures reports are found in the MIME shapes reporters
// send, whatever the Content-Type, with the attachment's file name.
func TestExtractMail(t *testing.T) {
	x := reportgen.Generate(21, 10, reportgen.Options{})
	big := reportgen.Generate(22, 300, reportgen.Options{}) // over ctrPeekLen
	gz := ctrGzip(x, "")
	zp := ctrZip(t, "google.com!example.com!1718236800!1718323199.xml", string(x))
	text := "Content-Type: text/plain; charset=UTF-8\r\n\r\nThis is an aggregate report from google.com.\r\n"
	inner := "Content-Type: multipart/mixed; boundary=\"in\"\r\n\r\n" + mailtest.Multipart("in", text,
		"Content-Type: application/zip; name=\"inner.zip\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(zp))
	deep := "Content-Type: application/gzip\r\nContent-Transfer-Encoding: base64\r\n\r\n" + mailtest.Base64(gz)
	for i := range 20 {
		b := fmt.Sprintf("b%d", i)
		deep = "Content-Type: multipart/mixed; boundary=\"" + b + "\"\r\n\r\n" + mailtest.Multipart(b, deep)
	}
	tests := []struct {
		name  string
		in    string
		names []string
		err   error
	}{
		{name: "octet-stream attachment holding gzip",
			in: mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx", text,
				"Content-Type: application/octet-stream; name=\"report.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(gz)),
			names: []string{"report.bin"}},
		{name: "x-gzip with an RFC 2231 split file name",
			in: mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx",
				"Content-Type: application/x-gzip\r\nContent-Disposition: attachment;\r\n filename*0*=utf-8''google.com%21example.com%21171823;\r\n filename*1*=6800%21171832319%C3%A9.xml.gz\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(gz)),
			names: []string{"google.com!example.com!1718236800!171832319é.xml.gz"}},
		{name: "RFC 2047 encoded name",
			in:    mailHead + "Content-Type: application/zip; name=\"=?UTF-8?B?csOpcG9ydC56aXA=?=\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" + mailtest.Base64(zp),
			names: []string{"google.com!example.com!1718236800!1718323199.xml"}},
		{name: "whole message is one gzip part",
			in:    mailHead + "Content-Type: application/gzip; name=\"r.xml.gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" + mailtest.Base64(append(gz, '\r', '\n')),
			names: []string{"r.xml.gz"}},
		{name: "nested message/rfc822",
			in: mailHead + "Content-Type: multipart/mixed; boundary=\"out\"\r\n\r\n" + mailtest.Multipart("out", text,
				"Content-Type: message/rfc822\r\n\r\nFrom: a@b\r\nSubject: fwd\r\nMIME-Version: 1.0\r\n"+inner),
			names: []string{"google.com!example.com!1718236800!1718323199.xml"}},
		{name: "inline XML, quoted-printable, LF line endings",
			in:    strings.ReplaceAll(mailHead+"Content-Type: text/xml\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n", "\r\n", "\n") + mailQP(x),
			names: []string{""}},
		{name: "mbox From line, sloppy base64 without padding",
			in: "From MAILER-DAEMON Fri Jun 14 00:00:00 2024\n" + mailHead + "Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
				strings.TrimRight(strings.ReplaceAll(mailtest.Base64(gz), "\r\n", " \t\r\n"), "= \t\r\n") + "\r\n",
			names: []string{""}},
		{name: "missing final boundary after the report",
			in: mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + strings.TrimSuffix(mailtest.Multipart("xx", text,
				"Content-Type: application/gzip\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(gz)), "--xx--\r\n"),
			names: []string{""}},
		{name: "XML part cut short, within the peek",
			in:  mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: text/xml\r\n\r\n" + string(x[:len(x)/2]),
			err: container.ErrMalformed},
		{name: "XML part cut short, past the peek",
			in:  mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: text/xml\r\n\r\n" + string(big[:len(big)/2]),
			err: container.ErrMalformed},
		{name: "text part that looks like a header",
			in:  mailHead + "Content-Type: text/plain\r\n\r\nReport-Domain: example.com\r\nSubmitter: google.com\r\n",
			err: container.ErrNoReport},
		{name: "mail with no report",
			in:  mailHead + "Content-Type: multipart/alternative; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx", text, "Content-Type: text/html\r\n\r\n<html><p>feedback</p></html>"),
			err: container.ErrNoReport},
		{name: "broken multipart and no report",
			in:  mailHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: text/plain\r\n\r\nhi\r\nnot a boundary\r\n--xx\r\n bad header\r\n\r\n",
			err: container.ErrMalformed},
		{name: "deep MIME nesting", in: mailHead + deep, err: container.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []ctrPayload
			err := Extract(strings.NewReader(tt.in), container.Limits{}, func(p container.Payload) error {
				b, err := io.ReadAll(p.Body)
				got = append(got, ctrPayload{p.Name, b})
				if err == nil {
					_, _, err = Parse(bytes.NewReader(b), container.Limits{})
				}
				return err
			})
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("error %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.name)
				if !bytes.Equal(p.body, x) {
					t.Errorf("payload %q is not the report", p.name)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.names) {
				t.Errorf("payloads %q, want %q", names, tt.names)
			}
		})
	}
}

// TestExtractMailCorpus ensures the corpus's report mails yield their
// attachment by name and its failure reports yield no aggregate report.
func TestExtractMailCorpus(t *testing.T) {
	for path, want := range map[string]string{
		"aggregate/twilight.eml":                                   "google.com!twlnet.com!1549756800!1549843199.xml",
		"aggregate/mimecast-weird-gzip.eml":                        "mimecast.org!ab.id.au!1693353600!1693439999!157a5fe30ec76f4bc0d8bccfc96c118a167a1280fee7c7465af5115e73082e5e.xml",
		"failure/dmarc_ruf_report_linkedin.eml":                    "",
		"failure/exim_plain_text_only_no_arf_part.eml":             "",
		"failure/[Netease DMARC Failure Report] Rent Reminder.eml": "",
	} {
		f, err := os.Open(filepath.Join(aggCorpusDir, path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ctrExtract(f, container.Limits{})
		f.Close()
		switch {
		case want == "" && !errors.Is(err, container.ErrNoReport):
			t.Errorf("%s: %v, want container.ErrNoReport", path, err)
		case want != "" && (err != nil || len(got) != 1 || got[0].name != want):
			t.Errorf("%s: %d payloads (%v), want %q", path, len(got), err, want)
		}
	}
}
