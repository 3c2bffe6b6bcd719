package imports

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// readAll returns every message of an mbox, or the first error other than
// ErrMboxMessageTooLarge, which is recorded as the message "<too large>".
func readAll(t *testing.T, m *MboxReader) ([]string, error) {
	t.Helper()
	var msgs []string
	for {
		msg, err := m.Next()
		switch {
		case errors.Is(err, io.EOF):
			return msgs, nil
		case errors.Is(err, ErrMboxMessageTooLarge):
			msgs = append(msgs, "<too large>")
		case err != nil:
			return msgs, err
		default:
			msgs = append(msgs, string(msg))
		}
	}
}

// TestMboxSplitsMessages ensures the mbox variants split into the messages
// their writers put in, with mboxrd quoting undone and line endings kept.
func TestMboxSplitsMessages(t *testing.T) {
	for _, c := range []struct {
		name string
		in   string
		want []string
	}{
		{"empty file", "", nil},
		{"one message", "From a@b Thu Nov 20 10:00:00 2026\nSubject: x\n\nbody\n\n",
			[]string{"Subject: x\n\nbody\n"}},
		{"two messages", "From a Mon\nA: 1\n\none\n\nFrom b Tue\nB: 2\n\ntwo\n",
			[]string{"A: 1\n\none\n", "B: 2\n\ntwo\n"}},
		{"mboxrd quoting", "From a\nX: y\n\n>From here\n>>From there\n>>>From far\n>Fromage\n From not\n\n",
			[]string{"X: y\n\nFrom here\n>From there\n>>From far\n>Fromage\n From not\n"}},
		{"CRLF", "From a\r\nX: y\r\n\r\nbody\r\n\r\nFrom b\r\nZ: w\r\n\r\n",
			[]string{"X: y\r\n\r\nbody\r\n", "Z: w\r\n"}},
		{"no final newline", "From a\nX: y\n\nlast line", []string{"X: y\n\nlast line"}},
		{"From inside a line is content", "From a\nX: y\n\nmail From someone\n", []string{"X: y\n\nmail From someone\n"}},
		{"separator at the very end", "From a\nX: y\n\nFrom b", []string{"X: y\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(t, NewMboxReader(strings.NewReader(c.in)))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Errorf("messages\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

// TestMboxLongLines ensures a line longer than the read buffer is content
// even when a piece of it happens to start with "From ", and that a long
// separator line is skipped whole.
func TestMboxLongLines(t *testing.T) {
	long := strings.Repeat("x", 64<<10-1) + "From not a separator\n"
	longSep := "From " + strings.Repeat("y", 100<<10) + "\n"
	in := longSep + "X: y\n\n" + long + "\n" + longSep + "Z: w\n"
	got, err := readAll(t, NewMboxReader(strings.NewReader(in)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "X: y\n\n"+long || got[1] != "Z: w\n" {
		t.Errorf("got %d messages, first %d bytes, second %q", len(got), len(got[0]), got[len(got)-1])
	}
}

// TestMboxRefusesOtherFiles ensures a file that is not an mbox is an
// error, not one odd message, and that IsMbox tells them apart.
func TestMboxRefusesOtherFiles(t *testing.T) {
	for _, in := range []string{"<?xml version=\"1.0\"?>\n<feedback/>", "Return-Path: <a@b>\nFrom: a@b\n\nx", "\x1f\x8b\x08"} {
		if IsMbox([]byte(in)) {
			t.Errorf("IsMbox(%q) = true", in)
		}
		if _, err := NewMboxReader(strings.NewReader(in)).Next(); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("Next on %q: %v, want an error", in, err)
		}
	}
	if !IsMbox([]byte("From MAILER-DAEMON Thu Nov 20")) {
		t.Error("IsMbox on an mbox = false")
	}
}

// TestMboxSkipsTooLargeMessage ensures a message over the limit is reported
// and the messages after it are still read.
func TestMboxSkipsTooLargeMessage(t *testing.T) {
	in := "From a\nA: 1\n\n" + strings.Repeat("big line\n", 100) + "\nFrom b\nB: 2\n\nsmall\n"
	m := NewMboxReader(strings.NewReader(in))
	m.max = 500
	got, err := readAll(t, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "<too large>" || got[1] != "B: 2\n\nsmall\n" {
		t.Errorf("got %q", got)
	}
}

// TestMboxReadError ensures a failing reader is an error, not a short mbox.
func TestMboxReadError(t *testing.T) {
	boom := errors.New("disk on fire")
	r := io.MultiReader(strings.NewReader("From a\nX: y\n\nbody\n"), &failingReader{boom})
	_, err := readAll(t, NewMboxReader(r))
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want %v", err, boom)
	}
}

type failingReader struct{ err error }

func (f *failingReader) Read([]byte) (int, error) { return 0, f.err }

// FuzzMbox ensures splitting never panics and that an mbox written with
// mboxrd quoting splits back into the messages written.
func FuzzMbox(f *testing.F) {
	f.Add([]byte("X: y\n\nFrom here\n>From there\n"), []byte("Z: w\r\n\r\nbody"))
	f.Add([]byte(""), []byte(">>From x\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		_, _ = readAll(t, NewMboxReader(bytes.NewReader(append(append([]byte("From x\n"), a...), b...))))
		msgs := [][]byte{a, b}
		var mbox bytes.Buffer
		for _, m := range msgs {
			mbox.WriteString("From sender Thu Nov 20 10:00:00 2026\n")
			mbox.Write(quoteFrom(m))
			mbox.WriteString("\n\n")
		}
		got, err := readAll(t, NewMboxReader(&mbox))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("%d messages, want 2", len(got))
		}
		for i, m := range msgs {
			if got[i] != string(m)+"\n" {
				t.Errorf("message %d = %q, want %q", i, got[i], string(m)+"\n")
			}
		}
	})
}

// quoteFrom is mboxrd quoting: one more '>' before every ">*From " line.
func quoteFrom(msg []byte) []byte {
	lines := bytes.SplitAfter(msg, []byte("\n"))
	var out []byte
	for _, l := range lines {
		if bytes.HasPrefix(bytes.TrimLeft(l, ">"), mboxFrom) {
			out = append(out, '>')
		}
		out = append(out, l...)
	}
	return out
}
