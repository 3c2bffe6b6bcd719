package container

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// TestSniff ensures formats are told apart by their first bytes.
func TestSniff(t *testing.T) {
	x := []byte(`<?xml version="1.0"?><feedback></feedback>`)
	var zl bytes.Buffer
	zw := zlib.NewWriter(&zl)
	zw.Write(x)
	zw.Close()
	tests := []struct {
		head []byte
		want Kind
	}{
		{x, KindXML},
		{[]byte("\r\n  <?xml version='1.0'?>"), KindXML},
		{[]byte("\xEF\xBB\xBF<feedback>"), KindXML},
		{[]byte("\xFF\xFE<\x00?\x00x\x00"), KindXML},
		{[]byte("<\x00f\x00"), KindXML},
		{reportgen.Gzip(x), KindGzip},
		{zl.Bytes(), KindZlib},
		{reportgen.Zip("a.xml", x), KindZip},
		{[]byte("PK\x05\x06\x00\x00"), KindZip},
		{[]byte("Return-Path: <a@b>\r\nReceived: x\r\n"), KindMail},
		{[]byte("From MAILER-DAEMON Fri Jul  8 12:08:34 2011\nFrom: x\n"), KindMail},
		{[]byte("X-Mailer: x"), KindMail},
		{[]byte(""), KindUnknown},
		{[]byte("{\"organization-name\": \"x\"}"), KindJSON},
		{[]byte("\xEF\xBB\xBF \r\n{}"), KindJSON},
		{[]byte("[{}]"), KindUnknown},
		{[]byte("This is an aggregate report"), KindUnknown},
		{[]byte("xy not zlib"), KindUnknown},
		{[]byte(": no name"), KindUnknown},
	}
	for _, tt := range tests {
		if got := Sniff(tt.head); got != tt.want {
			t.Errorf("Sniff(%q) = %v, want %v", tt.head[:min(len(tt.head), 20)], got, tt.want)
		}
	}
}

// walkAll runs Walk for XML payloads whose first bytes contain mark and
// collects name and body of each.
func walkAll(r io.Reader, lim Limits, mark string) ([]string, error) {
	var got []string
	_, err := Walk(r, lim, KindXML, func(head []byte) bool { return bytes.Contains(head, []byte(mark)) }, func(p Payload) error {
		b, err := io.ReadAll(p.Body)
		got = append(got, p.Name+"="+string(b))
		return err
	})
	return got, err
}

// TestWalk ensures Walk hands over exactly the payloads match accepts,
// through every container, with their names, and counts them.
func TestWalk(t *testing.T) {
	a, b := []byte("<a>yes</a>"), []byte("<b>no</b>")
	mail := mimeHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx",
		"Content-Type: text/plain\r\n\r\n<a>prose is not sniffed as mail</a>",
		"Content-Type: application/octet-stream; name=\"r.zip\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(reportgen.Zip("in.xml", a)),
		"Content-Type: message/rfc822\r\n\r\nFrom: x@y\r\nContent-Type: application/gzip; name=\"fwd.gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(reportgen.Gzip(a)))
	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"plain", a, "[=<a>yes</a>]"},
		{"not accepted", b, "[]"},
		{"gzip of gzip", reportgen.Gzip(reportgen.Gzip(a)), "[=<a>yes</a>]"},
		{"zip", reportgen.Zip("one.xml", a), "[one.xml=<a>yes</a>]"},
		// A text part is not sniffed as mail, but XML in it is XML.
		{"mail", []byte(mail), "[=<a>prose is not sniffed as mail</a> in.xml=<a>yes</a> fwd.gz=<a>yes</a>]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := walkAll(bytes.NewReader(tt.in), Limits{}, "<a>")
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("got %q, want %s", got, tt.want)
			}
		})
	}
}

// TestWalkErrors ensures Walk's errors say what went wrong: the limits,
// a broken structure that left nothing, the callback's own error as it
// is, and the source's error wrapped.
func TestWalkErrors(t *testing.T) {
	a := []byte("<a>yes</a>")
	boom := errors.New("boom")
	brokenMail := mimeHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\n bad header\r\n\r\n"
	for _, tt := range []struct {
		name string
		in   io.Reader
		lim  Limits
		fn   func(Payload) error
		want error
	}{
		{"payload over MaxDecompressed", bytes.NewReader(append(a, strings.Repeat(" ", 100)...)), Limits{MaxDecompressed: 50}, nil, ErrTooLarge},
		{"gzip over MaxCompressed", bytes.NewReader(reportgen.Gzip(reportgen.Generate(1, 50, reportgen.Options{}))), Limits{MaxCompressed: 100}, nil, ErrTooLarge},
		{"corrupt gzip", bytes.NewReader(reportgen.Gzip(a)[:15]), Limits{}, nil, ErrMalformed},
		{"broken mail", strings.NewReader(brokenMail), Limits{}, nil, ErrMalformed},
		{"callback error", bytes.NewReader(a), Limits{}, func(Payload) error { return boom }, boom},
		{"source error", io.MultiReader(bytes.NewReader(a[:3]), &errReader{boom}), Limits{}, nil, boom},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fn := tt.fn
			if fn == nil {
				fn = func(p Payload) error { _, err := io.Copy(io.Discard, p.Body); return err }
			}
			_, err := Walk(tt.in, tt.lim, KindXML, func([]byte) bool { return true }, fn)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if tt.want == boom && tt.name == "source error" && errors.Is(err, ErrMalformed) {
				t.Fatalf("source error %v called malformed", err)
			}
		})
	}
}

// TestWalkKinds ensures one walk hands over payloads of several kinds,
// each with its kind: an XML attachment and a gzip JSON part of one mail,
// while Walk for XML alone never sees the JSON.
func TestWalkKinds(t *testing.T) {
	x, j := []byte("<a>yes</a>"), []byte(`{"report-id": "1"}`)
	mail := mimeHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n" + mailtest.Multipart("xx",
		"Content-Type: application/xml\r\n\r\n"+string(x),
		"Content-Type: application/tlsrpt+gzip\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64(reportgen.Gzip(j)),
		"Content-Type: application/json\r\n\r\n[1, 2]")
	var got []string
	n, err := WalkKinds(strings.NewReader(mail), Limits{}, func(k Kind, head []byte) bool { return k == KindXML || k == KindJSON },
		func(p Payload) error {
			b, err := io.ReadAll(p.Body)
			got = append(got, p.Kind.String()+"="+string(b))
			return err
		})
	if err != nil || n != 2 {
		t.Fatalf("n = %d, err = %v", n, err)
	}
	if want := `[xml=<a>yes</a> json={"report-id": "1"}]`; fmt.Sprint(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	xmlOnly, err := walkAll(strings.NewReader(mail), Limits{}, "")
	if err != nil || len(xmlOnly) != 1 {
		t.Fatalf("Walk for XML: %q, %v", xmlOnly, err)
	}
}
