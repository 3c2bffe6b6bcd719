package aggregate

import (
	"bufio"
	"bytes"
	"io"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

// Character sets. The scanner reads UTF-8 (or anything ASCII-compatible);
// xsDecodeCharset puts a decoder in front of it when the input says it is
// something else. Decisions, in the order they are applied:
//
//   - A UTF-8 byte order mark is dropped, and wins over a declaration that
//     says otherwise: the mark is written by the program that produced the
//     bytes, a declaration is often copied from a template.
//   - A UTF-16 mark (or "<" encoded as UTF-16 without a mark) means UTF-16:
//     the whole stream is transcoded. Some Windows reporters send UTF-16.
//   - Otherwise the encoding="..." of a leading <?xml?> declaration
//     (double or single quotes) selects a decoder from golang.org/x/text,
//     by its WHATWG label first (so ISO-8859-1 and US-ASCII read as
//     windows-1252, as browsers and mail clients do) and its IANA name next.
//   - A label we do not know, or one that cannot describe the ASCII bytes
//     we just read (UTF-16, UTF-32, the WHATWG "replacement" encoding), is
//     ignored and the input is read as UTF-8: DMARC reports are almost all
//     ASCII (domains, addresses, numbers), so reading them is better than
//     refusing them over a label.
//   - Bytes that are not valid UTF-8 after all this are replaced by U+FFFD
//     in each value (see aggText): a report is not refused for one stray
//     cp1252 quote in a header_from, as corpus file invalid_utf_8.xml shows.

// xsDeclPeek is how far into the input we look for the XML declaration.
const xsDeclPeek = 1024

// xsDecodeCharset returns a reader of br's XML as UTF-8 (see above).
func xsDecodeCharset(br *bufio.Reader) io.Reader {
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		br.Discard(3)
		return br
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}), bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		return transform.NewReader(br, unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM).NewDecoder())
	case bytes.HasPrefix(head, []byte{0, '<'}):
		return transform.NewReader(br, unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewDecoder())
	case bytes.HasPrefix(head, []byte{'<', 0}):
		return transform.NewReader(br, unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewDecoder())
	}
	head, _ = br.Peek(xsDeclPeek)
	label, ok := xsDeclaredEncoding(head)
	if !ok {
		return br
	}
	enc := xsCharset(label)
	if enc == nil {
		return br
	}
	return transform.NewReader(br, enc.NewDecoder())
}

// xsDeclaredEncoding returns the encoding label of the XML declaration at
// the start of head (after optional white space), the way encoding/xml's
// procInst reads it.
func xsDeclaredEncoding(head []byte) (string, bool) {
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) < 6 || !bytes.HasPrefix(head, []byte("<?xml")) || !xsSpace(head[5]) {
		return "", false
	}
	end := bytes.Index(head, []byte("?>"))
	if end < 0 {
		return "", false
	}
	decl := string(head[5:end])
	for i := 0; ; {
		k := strings.Index(decl[i:], "encoding=")
		if k < 0 || i+k+len("encoding=") >= len(decl) {
			return "", false
		}
		i += k + len("encoding=")
		if q := decl[i]; q == '"' || q == '\'' {
			j := strings.IndexByte(decl[i+1:], q)
			if j < 0 {
				return "", false
			}
			label := decl[i+1 : i+1+j]
			return label, label != "" && !strings.EqualFold(label, "utf-8")
		}
	}
}

// xsCharset returns the decoder for a declared encoding label, or nil to
// read the input as UTF-8 (unknown labels, labels that are not
// ASCII-compatible).
func xsCharset(label string) encoding.Encoding {
	label = strings.TrimSpace(label)
	enc, err := htmlindex.Get(label)
	if err != nil {
		enc, err = ianaindex.IANA.Encoding(label)
	}
	if err != nil || enc == nil || enc == unicode.UTF8 {
		return nil
	}
	// The declaration was read as ASCII; an encoding that decodes it to
	// anything else (UTF-16, "replacement") cannot be what the bytes are.
	const probe = `<?xml version="1.0" encoding=''?><feedback>`
	got, _, err := transform.String(enc.NewDecoder(), probe)
	if err != nil || got != probe {
		return nil
	}
	return enc
}
