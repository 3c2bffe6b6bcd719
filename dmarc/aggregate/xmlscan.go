package aggregate

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// A hand-written, streaming XML tokenizer for the aggregate report schema.
//
// Why not encoding/xml: it decodes 45,000-53,000 records/s (it allocates
// every token, name and attribute); this scanner hands out slices of its own
// buffer, does no allocation per token, skips text it is not asked to keep
// with bytes.IndexByte, and decodes 5-10 times faster. encoding/xml stays the
// reference in the differential fuzz test (FuzzAggregate). Why not
// github.com/orisano/gosax: it was slightly faster in the issue's
// measurement, but it is a new dependency, it is strict where real reporters
// are broken (an unescaped '<' in a value, invalid UTF-8), and the schema is
// small enough that the scanner below is all we need.
//
// What it accepts, and why:
//   - It is lenient where real reports are broken: a '<' that does not start
//     markup (`<email><x@y></email>`, `bad<xml.net`) is text; an end tag
//     closes the nearest open element of that name and any unclosed children
//     (the "ikea" report's unclosed wrapper ends up outside <feedback>); an
//     end tag that matches nothing is ignored; unknown entities and a bare
//     '&' stay literal; invalid UTF-8 is replaced later, per value.
//   - It refuses every DTD construct (<!DOCTYPE, <!ENTITY, any other <!...>
//     than a comment or CDATA) with container.ErrMalformed: entity expansion is how
//     XML bombs work and no real report has a DTD.
//   - It bounds memory: the buffer holds one tag or one kept text run, at
//     most xsMaxToken bytes; text that is not kept is skipped unbuffered.

const (
	xsBufStart = 4 << 10  // first buffer: most reports are a few KB
	xsBufSize  = 64 << 10 // buffer once the input proves larger
	xsMaxToken = 1 << 20  // longest tag or kept text run
	xsMaxValue = 64 << 10 // longest kept element value
	xsMaxDepth = 256      // deepest element nesting
	xsMaxName  = 1 << 10  // longest element name
)

// xsTok is the kind of token xsScanner.next returns. Text, comments, CDATA
// and processing instructions never come out: they are skipped or appended
// to the value being captured.
type xsTok uint8

const (
	xsTokEOF xsTok = iota
	xsTokStart
	xsTokEnd
)

// xsNameByte marks the bytes of an XML name as encoding/xml reads them:
// ASCII letters, digits, '_', ':', '.', '-' and every non-ASCII byte.
var xsNameByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '_' || c == ':' || c == '.' || c == '-' || c >= utf8.RuneSelf
	}
	return t
}()

// xsNameStart reports whether c may begin an element name.
func xsNameStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == ':' || c >= utf8.RuneSelf
}

func xsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// xsScanner tokenizes XML from r.
type xsScanner struct {
	r        io.Reader
	buf      []byte
	pos, end int   // unread input is buf[pos:end]
	off      int64 // stream offset of buf[0], for error messages
	eof      bool
	err      error // sticky error of r or of the scanner

	capture bool   // append text and CDATA to val
	val     []byte // the value being captured

	// text() classifies the '<' that ends a text run; markup() reuses it.
	pendPos     int
	pendKind    byte
	pendNameEnd int

	name  []byte // element name of the last tag (a slice of buf)
	attrs []byte // raw attributes of the last start tag (a slice of buf)
	empty bool   // the last start tag was <x/>
}

func (s *xsScanner) reset(r io.Reader) {
	if s.buf == nil {
		s.buf = make([]byte, xsBufStart)
	}
	*s = xsScanner{r: r, buf: s.buf, val: s.val[:0], pendPos: -1}
}

// offset is the stream offset of the next unread byte.
func (s *xsScanner) offset() int64 { return s.off + int64(s.pos) }

// more moves buf[keep:end] to the front (every index into buf shifts down by
// keep, whatever the result) and reads more input. It reports whether new
// bytes arrived; at EOF or on an error it returns false.
func (s *xsScanner) more(keep int) bool {
	s.pendPos = -1
	if keep > 0 {
		n := copy(s.buf, s.buf[keep:s.end])
		s.off += int64(keep)
		s.pos -= keep
		s.end = n
	}
	if s.eof || s.err != nil {
		return false
	}
	if s.end == len(s.buf) || len(s.buf) < xsBufSize && s.off > xsBufSize {
		if len(s.buf) >= xsMaxToken {
			s.err = fmt.Errorf("dmarc: XML token at byte %d longer than %d bytes: %w", s.offset(), xsMaxToken, container.ErrTooLarge)
			return false
		}
		nb := make([]byte, 2*len(s.buf))
		copy(nb, s.buf[:s.end])
		s.buf = nb
	}
	// Callers rescan a partial token after each call, so read at least as
	// much as is pending (up to 64 KiB): with a reader that returns a byte
	// at a time, rescanning stays linear instead of quadratic.
	start, want := s.end, min(max(s.end, 1), xsBufSize, len(s.buf)-s.end)
	for empty := 0; s.end-start < want; {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			s.err = err
		}
		if err != nil {
			break
		}
		if n == 0 {
			if empty++; empty == 100 {
				s.err = io.ErrNoProgress
				break
			}
		}
	}
	return s.end > start
}

// fail records a scanner error (sticky) and returns it.
func (s *xsScanner) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// stop returns the error that ended the input: a read error, or
// io.ErrUnexpectedEOF when the input ended inside a token.
func (s *xsScanner) stop() error {
	if s.err != nil {
		return s.err
	}
	return s.fail(fmt.Errorf("dmarc: XML ends inside markup at byte %d: %w: %w", s.offset(), container.ErrMalformed, io.ErrUnexpectedEOF))
}

// next returns the next start or end tag. At the end of the input it returns
// xsTokEOF and a nil error, or the read error.
func (s *xsScanner) next() (xsTok, error) {
	for {
		if s.err != nil {
			return xsTokEOF, s.err
		}
		if s.pos == s.end && !s.more(s.pos) {
			if s.err != nil {
				return xsTokEOF, s.err
			}
			return xsTokEOF, nil
		}
		if !s.capture {
			// Indentation between tags: skip it without a call.
			for s.pos < s.end && xsSpace(s.buf[s.pos]) {
				s.pos++
			}
			if s.pos == s.end {
				continue
			}
		}
		if s.buf[s.pos] == '<' {
			tok, isMarkup, err := s.markup()
			if err != nil {
				return xsTokEOF, err
			}
			if isMarkup {
				if tok != xsTokEOF {
					return tok, nil
				}
				continue // a comment, CDATA or processing instruction
			}
		}
		if err := s.text(); err != nil {
			return xsTokEOF, err
		}
	}
}

// markupKind classifies the '<' at buf[i]: 0 for text, or '/', '?', '!',
// or 'n' for a start tag whose name ends at *nameEnd. It may need more
// input, in which case it returns needMore.
func (s *xsScanner) markupKind(i int, nameEnd *int) (kind byte, needMore bool) {
	if i+1 >= s.end {
		return 0, !s.eof
	}
	c := s.buf[i+1]
	switch {
	case c == '/':
		if i+2 >= s.end {
			return 0, !s.eof
		}
		if xsNameStart(s.buf[i+2]) {
			return '/', false
		}
		return 0, false
	case c == '?' || c == '!':
		return c, false
	case xsNameStart(c):
		j := i + 2
		for j < s.end && xsNameByte[s.buf[j]] {
			j++
		}
		if j == s.end {
			return 0, !s.eof
		}
		switch s.buf[j] {
		case ' ', '\t', '\n', '\r', '/', '>':
			*nameEnd = j
			return 'n', false
		}
		// `<x@y>`: not a tag, the text of a broken value.
		return 0, false
	}
	return 0, false
}

// markup reads the markup at buf[pos] ('<'). isMarkup is false when the '<'
// is text; tok is xsTokEOF for markup that yields no token.
func (s *xsScanner) markup() (tok xsTok, isMarkup bool, err error) {
	var nameEnd int
	var kind byte
	needMore := false
	if s.pendPos == s.pos {
		kind, nameEnd = s.pendKind, s.pendNameEnd
		s.pendPos = -1
	} else {
		kind, needMore = s.markupKind(s.pos, &nameEnd)
	}
	for needMore {
		if !s.more(s.pos) {
			if s.err != nil {
				return xsTokEOF, false, s.err
			}
		}
		kind, needMore = s.markupKind(s.pos, &nameEnd)
	}
	switch kind {
	case 'n':
		return xsTokStart, true, s.startTag(nameEnd - s.pos)
	case '/':
		return xsTokEnd, true, s.endTag()
	case '?':
		return xsTokEOF, true, s.skipPast(2, "?>")
	case '!':
		return xsTokEOF, true, s.bang()
	}
	return xsTokEOF, false, nil
}

// startTag reads a start tag whose name is buf[pos+1:pos+nameLen].
func (s *xsScanner) startTag(nameLen int) error {
	for {
		gt, ok := s.tagEnd(s.pos + nameLen)
		if ok {
			start := s.pos
			s.name = s.buf[start+1 : start+nameLen]
			s.attrs = s.buf[start+nameLen : gt]
			s.empty = gt > start+nameLen && s.buf[gt-1] == '/'
			if s.empty {
				s.attrs = s.attrs[:len(s.attrs)-1]
			}
			s.pos = gt + 1
			return nil
		}
		if !s.more(s.pos) {
			return s.stop()
		}
	}
}

// tagEnd finds the '>' that ends the tag whose attributes begin at buf[i],
// skipping quoted attribute values.
func (s *xsScanner) tagEnd(i int) (int, bool) {
	var quote byte
	for ; i < s.end; i++ {
		c := s.buf[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '>':
			return i, true
		case c == '"' || c == '\'':
			quote = c
		}
	}
	return 0, false
}

// endTag reads `</name ...>`.
func (s *xsScanner) endTag() error {
	for {
		j := s.pos + 2
		for j < s.end && xsNameByte[s.buf[j]] {
			j++
		}
		if j < s.end && s.buf[j] == '>' {
			s.name = s.buf[s.pos+2 : j]
			s.pos = j + 1
			return nil
		}
		if k := bytes.IndexByte(s.buf[j:s.end], '>'); k >= 0 {
			s.name = s.buf[s.pos+2 : j]
			s.pos = j + k + 1
			return nil
		}
		if !s.more(s.pos) {
			return s.stop()
		}
	}
}

// bang reads a comment or CDATA section and refuses anything else after
// "<!": DOCTYPE, ENTITY and the other declarations of a DTD.
func (s *xsScanner) bang() error {
	for s.end-s.pos < 9 && s.more(s.pos) {
	}
	rest := s.buf[s.pos:s.end]
	switch {
	case bytes.HasPrefix(rest, []byte("<!--")):
		return s.skipPast(4, "-->")
	case bytes.HasPrefix(rest, []byte("<![CDATA[")):
		return s.cdata()
	case s.err != nil:
		return s.err
	case len(rest) < 9 && s.eof && (bytes.HasPrefix([]byte("<!--"), rest) || bytes.HasPrefix([]byte("<![CDATA["), rest)):
		return s.stop()
	}
	shown := rest[:min(len(rest), 9)]
	return s.fail(fmt.Errorf("dmarc: XML declaration %q at byte %d refused (DTDs and entities are not allowed): %w",
		shown, s.offset(), container.ErrMalformed))
}

// skipPast discards input up to and including the first occurrence of end,
// searching from buf[pos+from]. It needs no more buffer than len(end).
func (s *xsScanner) skipPast(from int, end string) error {
	i := s.pos + from
	for {
		if k := bytes.Index(s.buf[i:s.end], []byte(end)); k >= 0 {
			s.pos = i + k + len(end)
			return nil
		}
		// Keep the last len(end)-1 bytes: the terminator may straddle reads.
		s.pos = max(i, s.end-len(end)+1)
		if !s.more(s.pos) {
			return s.stop()
		}
		i = s.pos
	}
}

// cdata reads a CDATA section, appending it to val when capturing.
func (s *xsScanner) cdata() error {
	if !s.capture {
		return s.skipPast(9, "]]>")
	}
	for {
		if k := bytes.Index(s.buf[s.pos+9:s.end], []byte("]]>")); k >= 0 {
			raw := s.buf[s.pos+9 : s.pos+9+k]
			s.pos += 9 + k + 3
			return s.appendVal(raw, true)
		}
		if !s.more(s.pos) {
			return s.stop()
		}
	}
}

// text reads character data up to the next markup. Kept text must fit the
// buffer whole (entities and CR LF may not be split); other text is skipped
// as it streams by.
func (s *xsScanner) text() error {
	start := s.pos // first byte of the run (moves along when not capturing)
	scan := s.pos  // where to look for the next '<'
	end := -1
	for end < 0 {
		if i := bytes.IndexByte(s.buf[scan:s.end], '<'); i >= 0 {
			j := scan + i
			var nameEnd int
			kind, needMore := s.markupKind(j, &nameEnd)
			if !needMore {
				if kind != 0 {
					end = j
					s.pendPos, s.pendKind, s.pendNameEnd = j, kind, nameEnd
				} else {
					scan = j + 1 // a '<' that is text
				}
				continue
			}
			scan = j // look at this '<' again with more input
		} else {
			scan = s.end
		}
		if !s.capture {
			start = scan
		}
		s.pos = start
		ok := s.more(start)
		scan -= start
		start = 0
		if !ok {
			if s.err != nil {
				return s.err
			}
			end = s.end // the text runs to the end of the input
		}
	}
	s.pos = end
	if !s.capture {
		return nil
	}
	return s.appendVal(s.buf[start:end], false)
}

// appendVal decodes raw text (or CDATA) onto val.
func (s *xsScanner) appendVal(raw []byte, cdata bool) error {
	s.val = xsAppendText(s.val, raw, cdata)
	if len(s.val) > xsMaxValue {
		return s.fail(fmt.Errorf("dmarc: XML value at byte %d longer than %d bytes: %w", s.offset(), xsMaxValue, container.ErrTooLarge))
	}
	return nil
}

// xsAppendText appends raw character data to dst the way an XML parser
// reads it: CR LF and lone CR become LF, and (outside CDATA) the five
// predefined entities and character references are decoded. Unknown
// entities and a bare '&' are kept as they are, because reporters write
// "AT&T" unescaped and dropping text would be worse than keeping it.
func xsAppendText(dst, raw []byte, cdata bool) []byte {
	if bytes.IndexByte(raw, '\r') < 0 && (cdata || bytes.IndexByte(raw, '&') < 0) {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\r':
			dst = append(dst, '\n')
			i++
			if i < len(raw) && raw[i] == '\n' {
				i++
			}
		case c == '&' && !cdata:
			var n int
			dst, n = xsEntity(dst, raw[i:])
			i += n
		default:
			j := i + 1
			for j < len(raw) && raw[j] != '\r' && (cdata || raw[j] != '&') {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
		}
	}
	return dst
}

// xsEntity decodes the entity at the start of b (b[0] == '&') onto dst and
// returns how many bytes it used. As in encoding/xml, a character reference
// may have any number of leading zeros, and one to a surrogate becomes
// U+FFFD.
func xsEntity(dst, b []byte) ([]byte, int) {
	if len(b) >= 2 && b[1] == '#' {
		i, base := 2, 10
		if i < len(b) && b[i] == 'x' {
			i, base = i+1, 16
		}
		j := i
		for j < len(b) && xsDigit(b[j], base) {
			j++
		}
		if j > i && j < len(b) && b[j] == ';' {
			if n, err := strconv.ParseUint(string(b[i:j]), base, 64); err == nil && n <= utf8.MaxRune {
				return utf8.AppendRune(dst, rune(n)), j + 1
			}
		}
		return append(dst, '&'), 1
	}
	semi := bytes.IndexByte(b[:min(len(b), len("&quot;"))], ';')
	if semi < 0 {
		return append(dst, '&'), 1
	}
	switch string(b[1:semi]) {
	case "lt":
		return append(dst, '<'), semi + 1
	case "gt":
		return append(dst, '>'), semi + 1
	case "amp":
		return append(dst, '&'), semi + 1
	case "apos":
		return append(dst, '\''), semi + 1
	case "quot":
		return append(dst, '"'), semi + 1
	}
	return append(dst, '&'), 1
}

func xsDigit(c byte, base int) bool {
	return '0' <= c && c <= '9' || base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F')
}

// xsAttr is one attribute of a start tag.
type xsAttr struct {
	name  []byte
	value []byte // decoded
}

// xsParseAttrs splits raw attributes leniently (unquoted values and names
// without values are accepted). Only the tags before <feedback> are parsed,
// for their namespace declarations.
func xsParseAttrs(raw []byte) []xsAttr {
	var out []xsAttr
	i := 0
	for i < len(raw) {
		for i < len(raw) && (xsSpace(raw[i]) || raw[i] == '/') {
			i++
		}
		j := i
		for j < len(raw) && !xsSpace(raw[j]) && raw[j] != '=' && raw[j] != '/' {
			j++
		}
		if j == i {
			i++
			continue
		}
		a := xsAttr{name: raw[i:j]}
		for j < len(raw) && xsSpace(raw[j]) {
			j++
		}
		if j < len(raw) && raw[j] == '=' {
			j++
			for j < len(raw) && xsSpace(raw[j]) {
				j++
			}
			var v []byte
			if j < len(raw) && (raw[j] == '"' || raw[j] == '\'') {
				q := raw[j]
				k := bytes.IndexByte(raw[j+1:], q)
				if k < 0 {
					k = len(raw) - j - 1
				}
				v = raw[j+1 : j+1+k]
				j += k + 2
			} else {
				k := j
				for k < len(raw) && !xsSpace(raw[k]) {
					k++
				}
				v, j = raw[j:k], k
			}
			a.value = xsAppendText(nil, v, false)
		}
		out = append(out, a)
		i = j
	}
	return out
}

// xsSplitName splits a prefixed name the way encoding/xml does: only a
// colon with text on both sides separates prefix and local name.
func xsSplitName(name []byte) (prefix, local []byte) {
	if i := bytes.IndexByte(name, ':'); i > 0 && i < len(name)-1 {
		return name[:i], name[i+1:]
	}
	return nil, name
}
