package dmarc

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"strings"

	"github.com/emersion/go-message/textproto"
	"golang.org/x/text/encoding/htmlindex"
)

// Mail: the MIME tree is walked with go-message's textproto (lenient about
// the header and boundary quirks of real mailers, LF or CR LF), depth-limited
// by Limits.MaxDepth. Every leaf part is sniffed, whatever its Content-Type,
// except that the prose of a text/* part is never taken for a nested
// message. Decisions:
//   - A MIME structure error (a bad part header, a missing final boundary)
//     ends the walk of that multipart but not of the message: reports found
//     before it are kept. It becomes the result (ErrMalformed) only when the
//     message yields no report at all.
//   - Base64 bodies are decoded leniently: bytes outside the alphabet are
//     dropped and missing padding is added, as mail clients do.
//   - A message's own header is limited to ctrMaxHeader bytes. (go-message
//     reads part headers without a bound; a part header is bounded by the
//     message, whose size the SMTP listener limits.)

// ctrMaxHeader bounds the header of a message.
const ctrMaxHeader = 1 << 20

// mail walks an RFC 5322 message.
func (w *ctrWalker) mail(br *bufio.Reader, name string, depth int) error {
	if head, _ := br.Peek(5); string(head) == "From " {
		if err := ctrSkipLine(br); err != nil {
			return w.classify("mbox From line", err)
		}
	}
	lr := &io.LimitedReader{R: br, N: ctrMaxHeader}
	hb := bufio.NewReader(lr)
	h, err := textproto.ReadHeader(hb)
	if lr.N <= 0 {
		return fmt.Errorf("dmarc: mail header larger than %d bytes: %w", ctrMaxHeader, ErrTooLarge)
	}
	if err != nil {
		if w.limitErr != nil {
			return w.limitErr
		}
		w.noteBroken("mail header", err)
		return nil
	}
	lr.N = 1<<63 - 1 // the body may be as long as the limits below allow
	return w.entity(h, hb, name, depth)
}

func ctrSkipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

// noteBroken remembers the first MIME structure error.
func (w *ctrWalker) noteBroken(what string, err error) {
	if w.broken == nil {
		w.broken = fmt.Errorf("dmarc: %s: %w: %w", what, ErrMalformed, err)
	}
}

// entity walks a message or part with header h and raw body.
func (w *ctrWalker) entity(h textproto.Header, body io.Reader, name string, depth int) error {
	if depth > w.lim.MaxDepth {
		return fmt.Errorf("dmarc: MIME parts nested deeper than %d: %w", w.lim.MaxDepth, ErrTooLarge)
	}
	mt, params := ctrMediaType(h.Get("Content-Type"))
	if fn := ctrFilename(h, params); fn != "" {
		name = fn
	}
	if strings.HasPrefix(mt, "multipart/") && params["boundary"] != "" {
		return w.multipart(body, params["boundary"], name, depth)
	}
	dec := ctrTransferDecode(body, h.Get("Content-Transfer-Encoding"))
	if mt == "message/rfc822" || mt == "message/global" {
		br := ctrGetBuf(dec)
		defer ctrPutBuf(br)
		return w.mail(br, name, depth+1)
	}
	return w.walk(dec, name, depth+1, !strings.HasPrefix(mt, "text/"))
}

func (w *ctrWalker) multipart(body io.Reader, boundary, name string, depth int) error {
	mr := textproto.NewMultipartReader(body, boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if w.limitErr != nil {
				return w.limitErr
			}
			w.noteBroken("MIME multipart", err)
			return nil
		}
		// A part cut short (no closing boundary) reads io.ErrUnexpectedEOF.
		body := limMalformedReader{p, "MIME part"}
		if err := w.entity(p.Header, body, name, depth+1); err != nil {
			return err
		}
	}
}

// ctrMediaType parses a Content-Type, leniently: the default is text/plain
// (RFC 2045), and a header with bad parameters keeps its type and boundary.
func ctrMediaType(v string) (string, map[string]string) {
	if strings.TrimSpace(v) == "" {
		return "text/plain", nil
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt == "" {
		before, _, _ := strings.Cut(v, ";")
		mt = strings.ToLower(strings.TrimSpace(before))
		if params == nil {
			params = ctrLooseParams(v)
		}
	}
	return mt, params
}

// ctrLooseParams splits `; key=value` parameters that mime.ParseMediaType
// refused (duplicates, stray characters).
func ctrLooseParams(v string) map[string]string {
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

// ctrFilename returns a part's file name: Content-Disposition filename,
// else Content-Type name, with RFC 2231 continuations (by mime) and RFC 2047
// encoded words decoded.
func ctrFilename(h textproto.Header, ctParams map[string]string) string {
	name := ""
	if d := h.Get("Content-Disposition"); d != "" {
		_, dp := ctrMediaType(d)
		name = dp["filename"]
	}
	if name == "" {
		name = ctParams["name"]
	}
	if strings.Contains(name, "=?") {
		wd := mime.WordDecoder{CharsetReader: ctrCharsetReader}
		if dec, err := wd.DecodeHeader(name); err == nil {
			name = dec
		}
	}
	return strings.ToValidUTF8(strings.TrimSpace(name), "\uFFFD")
}

func ctrCharsetReader(charset string, r io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, err
	}
	return enc.NewDecoder().Reader(r), nil
}

// ctrTransferDecode undoes a Content-Transfer-Encoding. Decoding errors
// come out as ErrMalformed.
func ctrTransferDecode(r io.Reader, cte string) io.Reader {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		return limMalformedReader{base64.NewDecoder(base64.StdEncoding, &ctrBase64Filter{r: r}), "base64 body"}
	case "quoted-printable":
		return limMalformedReader{quotedprintable.NewReader(r), "quoted-printable body"}
	}
	return r
}

// ctrBase64Alphabet marks the bytes kept by ctrBase64Filter.
var ctrBase64Alphabet = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()

// ctrBase64Filter drops what is not base64 (line breaks, spaces, stray
// characters) and pads a truncated last quantum.
type ctrBase64Filter struct {
	r   io.Reader
	n   int64 // alphabet bytes passed on
	pad []byte
	eof bool
}

func (f *ctrBase64Filter) Read(p []byte) (int, error) {
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
			if ctrBase64Alphabet[c] {
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
