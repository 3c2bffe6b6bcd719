package container

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/mailtest"
)

const mimeHead = "From: noreply-dmarc-support@google.com\r\nTo: dmarc@reports.example.net\r\n" +
	"Subject: Report domain: example.com\r\nMIME-Version: 1.0\r\n"

// mimeParts walks in and describes every part: depth, type, file name,
// the Subject of its message, its body (for an embedded message, its
// Subject, then its parts, walked).
func mimeParts(in string, lim Limits) ([]string, *MIMEWalker, error) {
	var got []string
	var w *MIMEWalker
	w = NewMIMEWalker(lim, func(p *Part) error {
		d := fmt.Sprintf("%d %s %q in %q", p.Depth, p.Type, p.Filename, p.Message.Header.Get("Subject"))
		if p.Embedded != nil {
			got = append(got, d+" holds "+p.Embedded.Header.Get("Subject"))
			return p.Walk()
		}
		b, err := io.ReadAll(p.Body)
		got = append(got, d+": "+string(b))
		return w.Check("body", err)
	})
	err := w.Walk(strings.NewReader(in), "test mail")
	return got, w, err
}

// TestMIMEWalker ensures the walker hands over every leaf with its type,
// file name, message and decoded body, walks embedded messages on demand,
// and reads header block parts.
func TestMIMEWalker(t *testing.T) {
	fwd := "From: a@b\r\nSubject: inner\r\nContent-Type: multipart/mixed; boundary=in\r\n\r\n" +
		mailtest.Multipart("in", "Content-Type: text/csv; name=\"=?UTF-8?B?csOpcG9ydC5jc3Y=?=\"\r\n\r\na,b")
	in := "From MAILER-DAEMON Fri Jun 14 00:00:00 2024\n" + mimeHead +
		"Content-Type: multipart/mixed;\r\n boundary=\"out\"\r\n\r\n" + mailtest.Multipart("out",
		"\r\nno header: text/plain",
		"Content-Type: application/octet-stream\r\nContent-Disposition: attachment; filename*0*=utf-8''a%C3%A9;\r\n filename*1=.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n"+
			strings.TrimRight(mailtest.Base64([]byte("sloppy base64")), "=\r\n")+" \t\r\n",
		"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=C3=A9",
		"Content-Type: message/rfc822\r\n\r\n"+fwd,
		"Content-Type: text/rfc822-headers\r\n\r\nSubject: headers only\r\nX-Bad line\r\n")
	got, w, err := mimeParts(in, Limits{})
	if err != nil || w.Broken() != nil {
		t.Fatal(err, w.Broken())
	}
	want := []string{
		`1 text/plain "" in "Report domain: example.com": no header: text/plain`,
		`1 application/octet-stream "aé.bin" in "Report domain: example.com": sloppy base64`,
		`1 text/plain "" in "Report domain: example.com": café`,
		`1 message/rfc822 "" in "Report domain: example.com" holds inner`,
		`3 text/csv "réport.csv" in "inner": a,b`,
		`1 text/rfc822-headers "" in "Report domain: example.com" holds headers only`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parts:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w.Top().Header.Get("To") != "dmarc@reports.example.net" {
		t.Errorf("top header %v", w.Top().Header)
	}
}

// TestMIMEWalkerErrors ensures a broken structure is noted, not returned,
// after the parts before it, while limits and the visitor's errors end
// the walk.
func TestMIMEWalkerErrors(t *testing.T) {
	deep := "Content-Type: text/plain\r\n\r\nbottom"
	for i := range 20 {
		b := fmt.Sprintf("b%d", i)
		deep = "Content-Type: multipart/mixed; boundary=\"" + b + "\"\r\n\r\n" + mailtest.Multipart(b, deep)
	}
	t.Run("broken multipart", func(t *testing.T) {
		in := mimeHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: text/plain\r\n\r\nhi\r\n--xx\r\n bad header\r\n\r\n"
		got, w, err := mimeParts(in, Limits{})
		if err != nil || len(got) != 1 || !errors.Is(w.Broken(), ErrMalformed) {
			t.Fatalf("%q, %v, broken %v", got, err, w.Broken())
		}
	})
	// The part without its closing boundary ends with the mail, so the
	// embedded message is read as far as it goes, as a top-level one is.
	t.Run("embedded header cut short", func(t *testing.T) {
		in := mimeHead + "Content-Type: multipart/mixed; boundary=\"xx\"\r\n\r\n--xx\r\nContent-Type: message/rfc822\r\n\r\nSubject: cut\r\nContent-Type: text/plain"
		got, w, err := mimeParts(in, Limits{})
		if err != nil || fmt.Sprint(got) != `[1 message/rfc822 "" in "Report domain: example.com" holds cut 2 text/plain "" in "cut": ]` || !errors.Is(w.Broken(), ErrMalformed) {
			t.Fatalf("%q, %v, broken %v", got, err, w.Broken())
		}
	})
	for _, tt := range []struct {
		name string
		in   string
		lim  Limits
	}{
		{"deep nesting", mimeHead + deep, Limits{}},
		{"mail over MaxCompressed", mimeHead + "\r\n" + strings.Repeat("x", 2000), Limits{MaxCompressed: 1000}},
		{"header block over MaxHeaderBlock", strings.Repeat("X-Pad: "+strings.Repeat("a", 100)+"\r\n", MaxHeaderBlock/100), Limits{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := mimeParts(tt.in, tt.lim); !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v, want ErrTooLarge", err)
			}
		})
	}
	t.Run("visitor error", func(t *testing.T) {
		boom := errors.New("boom")
		w := NewMIMEWalker(Limits{}, func(*Part) error { return boom })
		if err := w.Walk(strings.NewReader(mimeHead+"\r\nbody"), "mail"); err != boom {
			t.Fatalf("error %v, want it as is", err)
		}
	})
	t.Run("source error", func(t *testing.T) {
		boom := errors.New("boom")
		w := NewMIMEWalker(Limits{}, func(p *Part) error { _, err := io.ReadAll(p.Body); return err })
		err := w.Walk(io.MultiReader(strings.NewReader(mimeHead+"\r\nbody"), &errReader{boom}), "mail")
		if !errors.Is(err, boom) || errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v, want boom, not malformed", err)
		}
	})
}

// TestParseFields ensures header blocks are read leniently: folded
// values, "Name : value", lines that are not fields, blank lines.
func TestParseFields(t *testing.T) {
	h := ParseFields("Subject: a\r\n  b\r\nnot a field\r\n continuation of nothing\r\n\r\nX-A : 1\nx-a: 2\n")
	if got := fmt.Sprint(h); got != "[{Subject a b} {X-A 1} {x-a 2}]" {
		t.Errorf("fields %s", got)
	}
	if h.Get("x-A") != "1" || fmt.Sprint(h.All("X-a")) != "[1 2]" || h.Get("Nope") != "" {
		t.Errorf("Get/All on %v", h)
	}
	if n := len(ParseFields(strings.Repeat("A: b\n", MaxFields+5))); n != MaxFields {
		t.Errorf("%d fields kept, want %d", n, MaxFields)
	}
}
