package aggregate

import (
	"bytes"
	"io"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// Extract finds the aggregate reports in r, whatever wraps them: plain XML,
// gzip, zlib, zip and mail, as container.Walk unwraps them. It calls fn for
// each XML payload that has a <feedback> tag in its first 64 KiB
// (container.PeekLen); fn must read what it needs of p.Body before
// returning, typically with NewReader.
//
// Errors: an error of fn stops the walk and is returned as is. Otherwise
// ErrNoReport when nothing was found (an empty input, a mail without a
// report), and the errors of container.Walk: ErrTooLarge past a limit,
// ErrMalformed for corrupt archives or compressed data, or a broken MIME
// structure that left no report; errors of r itself come back wrapped.
func Extract(r io.Reader, lim container.Limits, fn func(p container.Payload) error) error {
	n, err := container.Walk(r, lim, container.KindXML, hasFeedback, fn)
	if err == nil && n == 0 {
		err = container.NoReport("dmarc: no aggregate report in the input")
	}
	return err
}

// LooksLikeReport reports whether head, the first bytes of an XML
// payload, holds a <feedback> start tag: what Extract hands over. A caller
// walking for several kinds at once (container.WalkKinds) matches with it.
func LooksLikeReport(head []byte) bool { return hasFeedback(head) }

// hasFeedback reports whether p holds a <feedback> (or <x:feedback>) start
// tag, in UTF-8 or UTF-16.
func hasFeedback(p []byte) bool {
	if bytes.IndexByte(p[:min(len(p), 4)], 0) >= 0 {
		p = bytes.ReplaceAll(p, []byte{0}, nil)
	}
	for i := 0; ; {
		k := bytes.Index(p[i:], []byte("feedback"))
		if k < 0 {
			return false
		}
		j := i + k
		if j > 0 && (p[j-1] == '<' || p[j-1] == ':') && j+8 < len(p) {
			if c := p[j+8]; xsSpace(c) || c == '>' || c == '/' {
				return true
			}
		}
		i = j + 8
	}
}
