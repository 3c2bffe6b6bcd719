package container

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Kind is the format of an input as Sniff recognizes it from its first
// bytes. Names and MIME types are never trusted: reporters send zips called
// .gz, gzip as application/octet-stream, XML as text/plain.
type Kind int

// The kinds Sniff tells apart.
const (
	KindUnknown Kind = iota
	KindXML
	KindGzip
	KindZlib
	KindZip
	KindMail // an RFC 5322 message (or an mbox "From " line and a message)
	KindJSON // a JSON object (SMTP TLS reports, RFC 8460)
)

// String returns the kind's lower-case name ("gzip").
func (k Kind) String() string {
	switch k {
	case KindXML:
		return "xml"
	case KindGzip:
		return "gzip"
	case KindZlib:
		return "zlib"
	case KindZip:
		return "zip"
	case KindMail:
		return "mail"
	case KindJSON:
		return "json"
	}
	return "unknown"
}

// SniffLen is the number of leading bytes Sniff looks at at most.
const SniffLen = 512

// Sniff returns the kind of an input from its first bytes (SniffLen is
// enough). XML may start with a UTF-8 or UTF-16 byte order mark and white
// space; mail must start with a header field ("Name: value") or an mbox
// "From " line; JSON is an object: '{' after an optional UTF-8 byte order
// mark and white space.
func Sniff(head []byte) Kind {
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return KindGzip
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return KindZip
	case isZlib(head):
		return KindZlib
	case isXML(head):
		return KindXML
	case isMail(head):
		return KindMail
	case isJSON(head):
		return KindJSON
	}
	return KindUnknown
}

func isJSON(h []byte) bool {
	h = bytes.TrimPrefix(h, []byte{0xEF, 0xBB, 0xBF})
	h = bytes.TrimLeft(h, " \t\r\n")
	return len(h) > 0 && h[0] == '{'
}

// isZlib checks the RFC 1950 header: deflate, a window of at most 32 KiB,
// no preset dictionary, and the header checksum.
func isZlib(h []byte) bool {
	return len(h) >= 2 && h[0]&0x0f == 8 && h[0]>>4 <= 7 && h[1]&0x20 == 0 &&
		(uint16(h[0])<<8|uint16(h[1]))%31 == 0
}

func isXML(h []byte) bool {
	switch {
	case bytes.HasPrefix(h, []byte{0xEF, 0xBB, 0xBF}):
		h = h[3:]
	case bytes.HasPrefix(h, []byte{0xFE, 0xFF}), bytes.HasPrefix(h, []byte{0xFF, 0xFE}):
		h = bytes.ReplaceAll(h[2:], []byte{0}, nil)
	case bytes.HasPrefix(h, []byte{0, '<'}), bytes.HasPrefix(h, []byte{'<', 0}):
		return true
	}
	h = bytes.TrimLeft(h, " \t\r\n")
	return len(h) > 0 && h[0] == '<'
}

// isMail checks for an mbox "From " line or a header field name. RFC
// 5322 allows any printable character in a field name; real ones are
// letters, digits and '-', and accepting only those keeps JSON and prose
// out.
func isMail(h []byte) bool {
	if bytes.HasPrefix(h, []byte("From ")) {
		return true
	}
	for i, c := range h {
		switch {
		case c == ':':
			return i > 0
		case i >= 100 || !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'):
			return false
		}
	}
	return false
}

// Payload is one payload found by Walk.
type Payload struct {
	Name string    // file, zip member or attachment name, when there is one
	Kind Kind      // what Sniff said it is (KindXML, KindJSON)
	Body io.Reader // the payload, streamed; valid only during the callback
}

// PeekLen is how far into a payload Walk looks (for the match function)
// before handing it over; it is also the read buffer of each layer.
const PeekLen = 64 << 10

// Walk finds the payloads of kind want in r, whatever wraps them: nothing,
// gzip (also gzip inside gzip, and bytes after the gzip member), zlib, zip
// (several members, empty member names), and RFC 5322 mail with the payload
// in any MIME part (whatever its Content-Type), a whole message that is
// one gzip part, or a nested message/rfc822. Formats are sniffed from their
// bytes (Sniff). For each input of kind want it calls match with its first
// bytes (PeekLen, fewer when it is shorter), and when match says yes, fn;
// fn must read what it needs of p.Body before returning. Nothing is written
// to disk: a zip archive is read into memory, within MaxCompressed. Walk
// returns how many payloads it gave fn.
//
// lim is enforced while streaming: compressed bytes per input or member
// (MaxCompressed), payload bytes over all payloads (MaxDecompressed), the
// expansion ratio of each decompressor (MaxRatio), zip members (MaxMembers)
// and nesting of containers and MIME parts (MaxDepth).
//
// Errors: an error of fn stops the walk and is returned as is. Otherwise
// ErrTooLarge past a limit, ErrMalformed for corrupt archives or compressed
// data, or a broken MIME structure that left no payload; errors of r itself
// come back wrapped. Finding nothing is not an error: the count is 0.
func Walk(r io.Reader, lim Limits, want Kind, match func(head []byte) bool, fn func(p Payload) error) (int, error) {
	return WalkKinds(r, lim, func(k Kind, head []byte) bool { return k == want && match(head) }, fn)
}

// WalkKinds is Walk for payloads of several kinds in one pass (a mail with
// an aggregate report and a TLS report): match is asked about every input
// whose kind is neither a container (gzip, zlib, zip) nor mail, with its
// kind and first bytes; fn gets the kind in Payload.Kind.
func WalkKinds(r io.Reader, lim Limits, match func(k Kind, head []byte) bool, fn func(p Payload) error) (int, error) {
	w := &walker{lim: lim.WithDefaults(), match: match, fn: fn}
	w.budget = w.lim.MaxDecompressed
	w.zipBudget = w.lim.MaxCompressed
	w.mime = &MIMEWalker{lim: w.lim, visit: w.part, watch: &w.watch}
	if err := w.walk(sourceReader{r}, "", 0, true); err != nil {
		return w.found, err
	}
	if w.found == 0 && w.mime.broken != nil {
		return 0, w.mime.broken
	}
	return w.found, nil
}

// walker walks one input.
type walker struct {
	lim       Limits
	match     func(Kind, []byte) bool
	fn        func(Payload) error
	budget    int64 // payload bytes still allowed (MaxDecompressed)
	zipBudget int64 // bytes of zip archives that may still be held in memory
	found     int
	watch     errWatch // first limit or source error seen by a layer
	mime      *MIMEWalker
}

// walk sniffs r and handles it by kind. mailOK is false for the body of a
// text/* MIME part, whose prose may look like a header line.
func (w *walker) walk(r io.Reader, name string, depth int, mailOK bool) error {
	if depth > w.lim.MaxDepth {
		return fmt.Errorf("dmarc: containers nested deeper than %d: %w", w.lim.MaxDepth, ErrTooLarge)
	}
	capr := &capReader{r: r, max: w.lim.MaxDecompressed, what: "decompressed input"}
	br := getBuf(w.watch.reader(capr))
	defer putBuf(br)
	head, err := br.Peek(SniffLen)
	if err != nil && err != io.EOF {
		return w.mime.classify("reading input", err)
	}
	switch kind := Sniff(head); kind {
	case KindXML, KindJSON:
		return w.payload(br, name, kind)
	case KindGzip, KindZlib:
		if err := capr.lower(w.lim.MaxCompressed, "compressed input"); err != nil {
			return err
		}
		return w.stream(br, kind, capr, name, depth)
	case KindZip:
		if err := capr.lower(min(w.lim.MaxCompressed, w.zipBudget), "zip archive"); err != nil {
			return err
		}
		return w.zip(br, name, depth)
	case KindMail:
		if mailOK {
			return w.mime.mail(br, name, depth)
		}
	}
	return nil
}

// part walks a leaf of a mail: a message/rfc822 part as a mail, anything
// else sniffed, whatever its Content-Type.
func (w *walker) part(p *Part) error {
	if p.Embedded != nil {
		return p.Walk()
	}
	return w.walk(p.Body, p.Filename, p.Depth+1, !strings.HasPrefix(p.Type, "text/"))
}

// gzipReaders recycles gzip readers: each holds a decompressor of tens of
// kilobytes, which small reports (a TLS report POSTed over HTTPS, a
// gzipped aggregate report) would otherwise allocate every time. A reader
// is in use only while the walk is inside its layer.
var gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}

// bufs recycles the read buffers of the layers of a walk: a layer's buffer
// is in use only while the walk is inside it (Payload.Body is valid only
// during the callback), and small reports would otherwise cost a 64 KiB
// allocation per layer.
var bufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, PeekLen) }}

func getBuf(r io.Reader) *bufio.Reader {
	br := bufs.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

func putBuf(br *bufio.Reader) {
	br.Reset(nil)
	bufs.Put(br)
}

// payload hands an input to fn if match accepts it.
func (w *walker) payload(br *bufio.Reader, name string, kind Kind) error {
	what := strings.ToUpper(kind.String())
	peek, err := br.Peek(PeekLen)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return w.mime.classify("reading "+what, err)
	}
	if !w.match(kind, peek) {
		return nil
	}
	w.found++
	body := &budgetReader{r: br, budget: &w.budget, max: w.lim.MaxDecompressed, what: what}
	// Zip names may be CP437, gzip names Latin-1: keep the name printable.
	name = strings.ToValidUTF8(name, "\uFFFD")
	return w.fn(Payload{Name: name, Kind: kind, Body: malformedReader{body, "reading report"}})
}

// stream unpacks gzip or zlib. Only the first gzip member is read
// (Multistream(false)): Mimecast's reports carry a CR LF after the member,
// which a multistream reader takes for a broken second member; reporters
// never split a report over several members.
func (w *walker) stream(br *bufio.Reader, kind Kind, capr *capReader, name string, depth int) error {
	var zr io.Reader
	if kind == KindGzip {
		gz := gzipReaders.Get().(*gzip.Reader)
		defer gzipReaders.Put(gz)
		if err := gz.Reset(br); err != nil {
			return w.mime.classify("gzip header", err)
		}
		gz.Multistream(false)
		if gz.Name != "" {
			name = gz.Name
		}
		zr = gz
	} else {
		zl, err := zlib.NewReader(br)
		if err != nil {
			return w.mime.classify("zlib header", err)
		}
		zr = zl
	}
	inner := &ratioReader{
		r: malformedReader{zr, kind.String() + " data"},
		// Bytes the decompressor consumed: read, minus what bufio holds
		// ahead of it (flate reads br directly, it is an io.ByteReader).
		in:    func() int64 { return capr.n - int64(br.Buffered()) },
		ratio: w.lim.MaxRatio,
		what:  kind.String(),
	}
	return w.walk(inner, name, depth+1, true)
}

// zip reads an archive into memory (zip needs random access; writing it to
// disk would be worse) and walks its members in order.
func (w *walker) zip(br *bufio.Reader, name string, depth int) error {
	data, err := io.ReadAll(br)
	if err != nil {
		return w.mime.classify("reading zip", err)
	}
	w.zipBudget -= int64(len(data))
	defer func() { w.zipBudget += int64(len(data)) }()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // never extracted to disk: any name is fine
		return w.mime.classify("zip archive", err)
	}
	if len(zr.File) > w.lim.MaxMembers {
		return fmt.Errorf("dmarc: zip archive has %d members, more than %d: %w", len(zr.File), w.lim.MaxMembers, ErrTooLarge)
	}
	for _, f := range zr.File {
		if err := w.zipMember(f, name, depth); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) zipMember(f *zip.File, name string, depth int) error {
	if f.FileInfo().IsDir() {
		return nil
	}
	rc, err := f.Open()
	if err != nil {
		return w.mime.classify(fmt.Sprintf("zip member %q", f.Name), err)
	}
	defer rc.Close()
	if f.Name != "" {
		name = f.Name
	}
	// The declared compressed size bounds what the member can read (its
	// section of the archive), so it is a fair denominator for the ratio.
	size := int64(f.CompressedSize64)
	inner := &ratioReader{
		r:     malformedReader{rc, fmt.Sprintf("zip member %q", f.Name)},
		in:    func() int64 { return size },
		ratio: w.lim.MaxRatio,
		what:  fmt.Sprintf("zip member %q", f.Name),
	}
	return w.walk(inner, name, depth+1, true)
}
