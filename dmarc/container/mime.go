package container

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"strings"
	"sync"

	"github.com/emersion/go-message/textproto"
	"golang.org/x/text/encoding/htmlindex"
)

// Mail: one walker, MIMEWalker, serves every reader of report mail
// (aggregate attachments, failure reports, and the formats to come). It
// walks the MIME tree with go-message's textproto multipart reader (lenient
// about the boundary quirks of real mailers, LF or CR LF), depth-limited by
// Limits.MaxDepth, and hands each leaf part to its caller with the transfer
// encoding undone. Decisions:
//   - A message's header (the mail's own, or one embedded in a
//     message/rfc822 part) is read by ReadHeaderBlock and ParseFields, not
//     by textproto.ReadHeader, which stops at the first line it does not
//     like; reporters' mails and the originals they quote are full of such
//     lines. A header block is limited to MaxHeaderBlock bytes; MIME part
//     headers are read by go-message, bounded by the message, whose size
//     the caller limits.
//   - A MIME structure error (a bad part header, a missing final boundary)
//     ends the walk of that multipart but not of the message: parts found
//     before it are kept. A last part without its closing boundary ends
//     with the mail and is read like any other (its format says whether it
//     is whole). It is remembered (Broken) for callers to report
//     when the mail yields nothing.
//   - Base64 bodies are decoded leniently: bytes outside the alphabet are
//     dropped and missing padding is added, as mail clients do.

// MaxHeaderBlock bounds a header block (of a message, an embedded message,
// a text/rfc822-headers part): larger is ErrTooLarge.
const MaxHeaderBlock = 1 << 20

// MaxFields is the number of fields ParseFields keeps of one block.
const MaxFields = 1000

// Header is the header of a message or MIME part: Get returns the value of
// the first field called name (case-insensitive), or "".
type Header interface{ Get(name string) string }

// Field is one header field, unfolded.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Fields is a header block in order, as ParseFields returns it.
type Fields []Field

// Get returns the value of the first field called name (case-insensitive),
// or "".
func (h Fields) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// All returns the values of every field called name, in order.
func (h Fields) All(name string) []string {
	var out []string
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

// Message is a mail message met by a walk: the mail itself, or one
// embedded in a message/rfc822 or message/global part.
type Message struct {
	Header Fields
	Depth  int // nesting of its header: 0 for the mail itself
}

// Part is one leaf of a MIME tree, as MIMEWalker hands it over: a part
// that is not a multipart, or the whole body of a message that is not one.
type Part struct {
	Header   Header            // the part's own header
	Type     string            // media type, lower-cased; "text/plain" when there is no Content-Type
	Params   map[string]string // the Content-Type parameters (charset, name...), keys lower-cased
	Filename string            // Content-Disposition filename, else Content-Type name, else the nearest enclosing part's; decoded
	Depth    int               // MIME nesting of the part; 0 for the body of the mail itself
	Message  *Message          // the message the part belongs to (the innermost)

	// Body is the part's body with its Content-Transfer-Encoding undone.
	// It is valid only during the callback; what the callback does not
	// read is skipped. For a part that has Embedded, Body reads on after
	// that header.
	Body io.Reader

	// Embedded is, for message/rfc822 and message/global parts, the
	// message they hold (its header read, its body not), and for header
	// block parts (text/rfc822-headers, message/rfc822-headers,
	// message/global-headers) the header they hold; nil for other parts.
	// A block cut short holds what was read.
	Embedded *Message

	w        *MIMEWalker
	walkable bool // an embedded message whose header was read whole
	name     string
}

// Walk walks the body of the message a message/rfc822 or message/global
// part holds, calling the walker's function for its parts. It does nothing
// for other parts, or when the embedded header could not be read whole.
func (p *Part) Walk() error {
	if !p.walkable {
		return nil
	}
	return p.w.entity(p.Embedded.Header, p.Body, p.name, p.Embedded, p.Embedded.Depth)
}

// MIMEWalker walks the MIME tree of mail messages and calls a function for
// each leaf part (see Part). It is used once, for one mail.
type MIMEWalker struct {
	lim    Limits
	visit  func(*Part) error
	watch  *errWatch
	broken error
	top    *Message
}

// NewMIMEWalker returns a walker that calls visit for each leaf part, in
// order. An error of visit ends the walk and is returned as is. lim bounds
// the nesting (MaxDepth) and, for Walk, the size of the mail
// (MaxCompressed); zero fields mean defaults.
func NewMIMEWalker(lim Limits, visit func(*Part) error) *MIMEWalker {
	return &MIMEWalker{lim: lim.WithDefaults(), visit: visit, watch: &errWatch{}}
}

// Walk reads a whole mail from r (an mbox "From " line first is skipped),
// at most MaxCompressed bytes, as a stream, and walks it. what names the
// mail in errors ("failure report mail").
//
// Errors: those of visit, as they are; ErrTooLarge past a limit (the mail's
// size, MIME nesting, a header block); errors of r, wrapped. A broken MIME
// structure is not an error of Walk: see Broken.
func (w *MIMEWalker) Walk(r io.Reader, what string) error {
	capr := &capReader{r: sourceReader{r}, max: w.lim.MaxCompressed, what: what}
	br := getBuf(w.watch.reader(capr))
	defer putBuf(br)
	return w.mail(br, "", 0)
}

// Broken returns the first MIME structure error of the walk (wrapping
// ErrMalformed), nil if there was none.
func (w *MIMEWalker) Broken() error { return w.broken }

// Top returns the mail's own header, nil before Walk read it.
func (w *MIMEWalker) Top() *Message { return w.top }

// mail walks an RFC 5322 message read from br whose header is at depth.
func (w *MIMEWalker) mail(br *bufio.Reader, name string, depth int) error {
	if head, _ := br.Peek(5); string(head) == "From " {
		if err := skipLine(br); err != nil && err != io.EOF {
			return w.classify("mbox From line", err)
		}
	}
	block, err := ReadHeaderBlock(br)
	if err := w.check("mail header", err); err != nil {
		return err
	}
	m := &Message{Header: ParseFields(block), Depth: depth}
	if w.top == nil {
		w.top = m
	}
	if err != nil && err != io.EOF {
		return nil // cut short: noted by check, nothing more to read
	}
	return w.entity(m.Header, br, name, m, depth)
}

// entity walks a message or part with header h and raw body, belonging to
// message m.
func (w *MIMEWalker) entity(h Header, body io.Reader, name string, m *Message, depth int) error {
	if depth > w.lim.MaxDepth {
		return fmt.Errorf("dmarc: MIME parts nested deeper than %d: %w", w.lim.MaxDepth, ErrTooLarge)
	}
	mt, params := MediaType(h.Get("Content-Type"))
	if fn := Filename(h, params); fn != "" {
		name = fn
	}
	if strings.HasPrefix(mt, "multipart/") && params["boundary"] != "" {
		return w.multipart(body, params["boundary"], name, m, depth)
	}
	p := &Part{Header: h, Type: mt, Params: params, Filename: name, Depth: depth, Message: m,
		Body: TransferDecode(body, h.Get("Content-Transfer-Encoding")), w: w, name: name}
	switch mt {
	case "message/rfc822", "message/global":
		return w.embedded(p, true)
	case "text/rfc822-headers", "message/rfc822-headers", "message/global-headers":
		return w.embedded(p, false)
	}
	return w.visit(p)
}

// embedded reads the header block of an embedded message (isMail) or a
// header block part into p.Embedded and hands p over.
func (w *MIMEWalker) embedded(p *Part, isMail bool) error {
	br := lineBufs.Get().(*bufio.Reader)
	br.Reset(p.Body)
	defer func() { br.Reset(nil); lineBufs.Put(br) }()
	if isMail {
		if head, _ := br.Peek(5); string(head) == "From " {
			if err := w.check("mbox From line", skipLine(br)); err != nil {
				return err
			}
		}
	}
	block, err := ReadHeaderBlock(br)
	if err := w.check("message header", err); err != nil {
		return err
	}
	p.Embedded = &Message{Header: ParseFields(block), Depth: p.Depth + 1}
	p.walkable = isMail && (err == nil || err == io.EOF)
	p.Body = br
	return w.visit(p)
}

func (w *MIMEWalker) multipart(body io.Reader, boundary, name string, m *Message, depth int) error {
	mr := textproto.NewMultipartReader(body, boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if w.watch.err != nil {
				return w.watch.err
			}
			w.noteBroken("MIME multipart", err)
			return nil
		}
		// A part cut short (no closing boundary) reads io.ErrUnexpectedEOF:
		// it ends with the mail, and the formats inside (gzip, zip, XML)
		// tell for themselves whether they are whole.
		if err := w.entity(&p.Header, malformedReader{lastPart{p, w}, "MIME part"}, name, m, depth+1); err != nil {
			return err
		}
	}
}

// lastPart reads a MIME part whose closing boundary may be missing: the
// end of the mail ends it (io.EOF), noted as a broken structure.
type lastPart struct {
	r io.Reader
	w *MIMEWalker
}

func (l lastPart) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) && l.w.watch.err == nil {
		l.w.noteBroken("MIME part", err)
		err = io.EOF
	}
	return n, err
}

// Check decides what a read error met while reading a part means, for
// callers reading part bodies: past a limit, or an error of the caller's
// reader, the walk must end with the error returned; a malformed part (bad
// base64, a missing boundary) is noted (see Broken) and nil is returned, so
// that what was read is used. nil and io.EOF give nil. what names the
// thing read in the note.
func (w *MIMEWalker) Check(what string, err error) error { return w.check(what, err) }

func (w *MIMEWalker) check(what string, err error) error {
	if err == nil || err == io.EOF {
		return nil
	}
	if w.watch.err != nil {
		return w.watch.err
	}
	if isClassified(err) && !errors.Is(err, ErrMalformed) {
		return err
	}
	w.noteBroken(what, err)
	return nil
}

// classify makes sure an error that ends the walk says what went wrong.
func (w *MIMEWalker) classify(what string, err error) error {
	if w.watch.err != nil {
		return w.watch.err
	}
	if isClassified(err) {
		return err
	}
	return fmt.Errorf("dmarc: %s: %w: %w", what, ErrMalformed, err)
}

// noteBroken remembers the first MIME structure error.
func (w *MIMEWalker) noteBroken(what string, err error) {
	if w.broken == nil {
		if errors.Is(err, ErrMalformed) {
			w.broken = &contextError{what: what, err: err}
		} else {
			w.broken = fmt.Errorf("dmarc: %s: %w: %w", what, ErrMalformed, err)
		}
	}
}

// contextError puts what in front of err, an error of this package's
// walkers, without repeating the "dmarc: " prefix err's message has:
// "dmarc: part 2: gzip data: malformed report", not "dmarc: part 2:
// dmarc: gzip data: ...".
type contextError struct {
	what string
	err  error
}

func (e *contextError) Error() string {
	return "dmarc: " + e.what + ": " + strings.TrimPrefix(e.err.Error(), "dmarc: ")
}

func (e *contextError) Unwrap() error { return e.err }

func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

// errWatch remembers the first limit or source error that passes through
// the readers it wraps, because the MIME reader flattens the errors it
// returns into text.
type errWatch struct{ err error }

func (e *errWatch) reader(r io.Reader) io.Reader { return watchReader{r, e} }

type watchReader struct {
	r io.Reader
	e *errWatch
}

func (c watchReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF && c.e.err == nil && isClassified(err) && !errors.Is(err, ErrMalformed) {
		c.e.err = err
	}
	return n, err
}

// lineBufs recycles the readers of embedded header blocks: small, because
// what they read ahead of the header is body, which is mostly skipped.
var lineBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// blockBufs recycles the buffers header blocks are read into before they
// become one string: most are small, and a buffer grown for each would be
// much of the garbage of a walk.
var blockBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled is the largest buffer put back into blockBufs.
const maxPooled = 64 << 10

func getBlockBuf() *bytes.Buffer { return blockBufs.Get().(*bytes.Buffer) }

func putBlockBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		b.Reset()
		blockBufs.Put(b)
	}
}

// ReadString reads r to its end, at most limit bytes, into a string; on a
// read error it returns what it read with the error.
func ReadString(r io.Reader, limit int64) (string, error) {
	b := getBlockBuf()
	defer putBlockBuf(b)
	_, err := b.ReadFrom(io.LimitReader(r, limit))
	return b.String(), err
}

// ReadHeaderBlock reads a header block: lines up to a blank line (consumed)
// or the end of input. A block over MaxHeaderBlock bytes is ErrTooLarge. On
// a read error it returns what it read with the error.
func ReadHeaderBlock(br *bufio.Reader) (string, error) {
	block := getBlockBuf()
	defer putBlockBuf(block)
	lineStart := true
	for {
		chunk, err := br.ReadSlice('\n')
		if lineStart && err == nil && (len(chunk) == 1 || len(chunk) == 2 && chunk[0] == '\r') {
			return block.String(), nil
		}
		if block.Len()+len(chunk) > MaxHeaderBlock {
			return "", fmt.Errorf("dmarc: header block larger than %d bytes: %w", MaxHeaderBlock, ErrTooLarge)
		}
		block.Write(chunk)
		lineStart = err == nil
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return block.String(), err
		}
	}
}

// ParseFields parses a header block read by ReadHeaderBlock, or a body made
// of fields (a message/feedback-report part). It reads "Name: value" lines,
// LF or CR LF, leniently: a line starting with white space continues the
// previous field, a line that is not a field is skipped, blank lines are
// ignored (some reporters put one between groups of ARF fields). At most
// MaxFields fields are kept. Values are unfolded and trimmed, not decoded
// (see DecodeHeader). Names, and values that were not folded, are
// substrings of s.
func ParseFields(s string) Fields {
	var out Fields
	valStart, valEnd := -1, -1 // the current field's raw value is s[valStart:valEnd]
	flush := func() {
		if valStart >= 0 {
			out[len(out)-1].Value = unfold(s[valStart:valEnd])
		}
		valStart = -1
	}
	for pos := 0; pos < len(s); {
		start := pos
		line, _, found := strings.Cut(s[pos:], "\n")
		pos += len(line)
		if found {
			pos++
		}
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.TrimSpace(line) == "":
		case line[0] == ' ' || line[0] == '\t':
			if valStart >= 0 {
				valEnd = start + len(line)
			}
		default:
			flush()
			name, _, ok := strings.Cut(line, ":")
			name = strings.TrimRight(name, " \t") // "Name : value" appears in the wild
			if !ok || !IsFieldName(name) || len(out) >= MaxFields {
				continue // and drop its continuation lines
			}
			if out == nil {
				out = make(Fields, 0, 16)
			}
			out = append(out, Field{Name: name})
			valStart, valEnd = start+strings.IndexByte(line, ':')+1, start+len(line)
		}
	}
	flush()
	return out
}

// unfold unfolds a raw field value: each line break and the white space
// around it become one space.
func unfold(raw string) string {
	if !strings.Contains(raw, "\n") {
		return strings.TrimSpace(raw)
	}
	var b strings.Builder
	b.Grow(len(raw))
	for part := range strings.SplitSeq(raw, "\n") {
		if part = strings.TrimSpace(part); part != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(part)
		}
	}
	return b.String()
}

// IsFieldName reports whether s is an RFC 5322 field name: printable
// US-ASCII but the colon, and no space.
func IsFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// DecodeHeader decodes RFC 2047 encoded words where it can and makes s
// valid UTF-8 (raw 8-bit header bytes in an unknown charset become U+FFFD).
func DecodeHeader(s string) string {
	if strings.Contains(s, "=?") {
		wd := mime.WordDecoder{CharsetReader: CharsetReader}
		if dec, err := wd.DecodeHeader(s); err == nil {
			s = dec
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// MediaType parses a Content-Type, leniently: the default is text/plain
// (RFC 2045), and a header with bad parameters keeps its type and boundary.
func MediaType(v string) (string, map[string]string) {
	if strings.TrimSpace(v) == "" {
		return "text/plain", nil
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt == "" {
		before, _, _ := strings.Cut(v, ";")
		mt = strings.ToLower(strings.TrimSpace(before))
		if params == nil {
			params = looseParams(v)
		}
	}
	return mt, params
}

// looseParams splits `; key=value` parameters that mime.ParseMediaType
// refused (duplicates, stray characters).
func looseParams(v string) map[string]string {
	params := map[string]string{}
	parts := strings.Split(v, ";")
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		if _, dup := params[k]; !dup {
			params[k] = strings.Trim(strings.TrimSpace(val), `"`)
		}
	}
	return params
}

// Filename returns a part's file name: Content-Disposition filename, else
// Content-Type name (ctParams, from MediaType), with RFC 2231 continuations
// (by mime) and RFC 2047 encoded words decoded.
func Filename(h Header, ctParams map[string]string) string {
	name := ""
	if d := h.Get("Content-Disposition"); d != "" {
		_, dp := MediaType(d)
		name = dp["filename"]
	}
	if name == "" {
		name = ctParams["name"]
	}
	return strings.TrimSpace(DecodeHeader(name))
}

// CharsetReader returns a reader converting r from charset (an IANA or
// WHATWG label) to UTF-8; an error for a charset it does not know.
func CharsetReader(charset string, r io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, err
	}
	return enc.NewDecoder().Reader(r), nil
}

// TransferDecode undoes a Content-Transfer-Encoding (base64 leniently, see
// the file comment, and quoted-printable); other encodings are read as
// they are. Decoding errors come out as ErrMalformed.
func TransferDecode(r io.Reader, cte string) io.Reader {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		return malformedReader{base64.NewDecoder(base64.StdEncoding, &base64Filter{r: r}), "base64 body"}
	case "quoted-printable":
		return malformedReader{quotedprintable.NewReader(r), "quoted-printable body"}
	}
	return r
}

// base64Alphabet marks the bytes kept by base64Filter.
var base64Alphabet = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()

// base64Filter drops what is not base64 (line breaks, spaces, stray
// characters) and pads a truncated last quantum.
type base64Filter struct {
	r   io.Reader
	n   int64 // alphabet bytes passed on
	pad []byte
	eof bool
}

func (f *base64Filter) Read(p []byte) (int, error) {
	for {
		if f.eof {
			n := copy(p, f.pad)
			f.pad = f.pad[n:]
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		n, err := f.r.Read(p)
		k := 0
		for _, c := range p[:n] {
			if base64Alphabet[c] {
				p[k] = c
				k++
			}
		}
		f.n += int64(k)
		switch {
		case err == io.EOF:
			f.eof = true
			f.pad = []byte("===")[:(4-f.n%4)%4]
			if f.n%4 == 1 {
				f.pad = nil // one lone byte cannot be padded; the decoder reports it
			}
		case err != nil:
			return k, err
		}
		if k > 0 {
			return k, nil
		}
	}
}
