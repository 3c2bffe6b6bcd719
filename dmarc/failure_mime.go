package dmarc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/emersion/go-message/textproto"
)

// The failure report walker mirrors the aggregate one (mail.go): go-message's
// textproto splits multiparts, ctrMediaType and ctrTransferDecode read part
// headers and bodies, Limits.MaxDepth bounds nesting. It differs in what it
// keeps: feedback parts are read whole (at most failMaxFeedback), original
// messages only up to the end of their header (the multipart reader skips
// the rest of the part as it streams past), text/plain parts only a prefix.
// Header blocks are read here rather than by textproto.ReadHeader, which
// stops at the first line it does not like; reporters' ARF parts and the
// originals they quote are full of such lines.

// failMaxItems bounds the feedback and original parts remembered for one
// mail; pairing them is quadratic.
const failMaxItems = 1000

// failMail is what the walk knows about the mail a part belongs to (the
// report mail, or a report mail forwarded inside it).
type failMail struct {
	fromDomain string // domain of its From header
	subject    string
}

// failItem is a feedback part or an original's header block, in the order
// met.
type failItem struct {
	isOrig bool
	fields failHeaders // a feedback part's fields
	orig   failHeaders // an original's header; for a feedback part, the one paired with it
	mail   *failMail
}

// failTextPart is the beginning of a text/plain part, kept for the plain-text
// fallback.
type failTextPart struct {
	text string
	mail *failMail
}

// failWalker walks one failure report mail.
type failWalker struct {
	lim      Limits
	items    []*failItem
	texts    []failTextPart
	top      *failMail
	broken   error // first MIME structure error, reported if nothing is found
	limitErr error // first limit or source error seen under go-message
}

// run walks the mail read from r.
func (w *failWalker) run(r io.Reader) error {
	capr := &limCapReader{r: limSourceReader{r}, max: w.lim.MaxCompressed, what: "failure report mail"}
	br := ctrGetBuf(failWatch{capr, w})
	defer ctrPutBuf(br)
	if head, _ := br.Peek(5); string(head) == "From " {
		if err := ctrSkipLine(br); err != nil && err != io.EOF {
			return w.fatal("mbox From line", err)
		}
	}
	return w.mail(br, 0)
}

// mail reads a message's header and walks its body.
func (w *failWalker) mail(br *bufio.Reader, depth int) error {
	block, err := failReadBlock(br)
	if err := w.check("mail header", err); err != nil {
		return err
	}
	h := failParseBlock(block)
	m := &failMail{fromDomain: failAddrDomain(h.Get("From")), subject: failDecode(h.Get("Subject"))}
	if w.top == nil {
		w.top = m
	}
	return w.entity(h, br, m, depth)
}

// failGetter is a header: go-message's for MIME parts, ours for messages.
type failGetter interface{ Get(name string) string }

// entity handles a message or part with header h and raw body by type.
// Types not listed are skipped unread.
func (w *failWalker) entity(h failGetter, body io.Reader, m *failMail, depth int) error {
	if depth > w.lim.MaxDepth {
		return fmt.Errorf("dmarc: MIME parts nested deeper than %d: %w", w.lim.MaxDepth, ErrTooLarge)
	}
	mt, params := ctrMediaType(h.Get("Content-Type"))
	if strings.HasPrefix(mt, "multipart/") && params["boundary"] != "" {
		return w.multipart(body, params["boundary"], m, depth)
	}
	dec := func() io.Reader { return ctrTransferDecode(body, h.Get("Content-Transfer-Encoding")) }
	switch mt {
	case "message/feedback-report":
		return w.feedback(dec(), m)
	case "message/rfc822", "message/global":
		return w.original(dec(), false, m, depth)
	case "text/rfc822-headers", "message/rfc822-headers", "message/global-headers":
		return w.original(dec(), true, m, depth)
	case "text/plain":
		return w.text(dec(), params["charset"], m)
	}
	return nil
}

func (w *failWalker) multipart(body io.Reader, boundary string, m *failMail, depth int) error {
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
		if err := w.entity(&p.Header, limMalformedReader{p, "MIME part"}, m, depth+1); err != nil {
			return err
		}
	}
}

// feedback reads a message/feedback-report part: at most failMaxFeedback
// bytes, so that a huge one costs no more than that to refuse.
func (w *failWalker) feedback(body io.Reader, m *failMail) error {
	data, err := failReadString(body, failMaxFeedback+1)
	if len(data) > failMaxFeedback {
		return fmt.Errorf("dmarc: feedback report part larger than %d bytes: %w", failMaxFeedback, ErrTooLarge)
	}
	if err := w.check("feedback report part", err); err != nil {
		return err
	}
	return w.add(&failItem{fields: failParseBlock(data), mail: m})
}

// original reads the header of an original message (message/rfc822) or a
// header block (text/rfc822-headers); the body is left to the multipart
// reader to skip. A message/rfc822 part that is itself a multipart/report
// is a forwarded report mail and is walked.
func (w *failWalker) original(body io.Reader, headersOnly bool, m *failMail, depth int) error {
	br := failLineBufs.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() { br.Reset(nil); failLineBufs.Put(br) }()
	block, err := failReadBlock(br)
	if err := w.check("original message header", err); err != nil {
		return err
	}
	h := failParseBlock(block)
	if !headersOnly {
		if mt, _ := ctrMediaType(h.Get("Content-Type")); mt == "multipart/report" {
			fwd := &failMail{fromDomain: failAddrDomain(h.Get("From")), subject: failDecode(h.Get("Subject"))}
			return w.entity(h, br, fwd, depth+1)
		}
	}
	if len(h) == 0 {
		return nil
	}
	return w.add(&failItem{isOrig: true, orig: h, mail: m})
}

func (w *failWalker) add(it *failItem) error {
	if len(w.items) >= failMaxItems {
		return fmt.Errorf("dmarc: more than %d feedback and original parts in one mail: %w", failMaxItems, ErrTooLarge)
	}
	w.items = append(w.items, it)
	return nil
}

// text keeps the beginning of a text/plain part for the plain-text
// fallback, converted to UTF-8.
func (w *failWalker) text(body io.Reader, charset string, m *failMail) error {
	if len(w.texts) >= failMaxTexts {
		return nil
	}
	if cs := strings.ToLower(charset); cs != "" && cs != "us-ascii" && cs != "utf-8" {
		if r, err := ctrCharsetReader(cs, body); err == nil {
			body = r
		}
	}
	data, err := failReadString(body, failMaxText)
	if err := w.check("text part", err); err != nil {
		return err
	}
	w.texts = append(w.texts, failTextPart{text: strings.ToValidUTF8(data, "\uFFFD"), mail: m})
	return nil
}

// check decides what a read error means: past a limit, or an error of the
// caller's reader, the walk ends with it; a malformed part (bad base64, a
// missing boundary) is noted and what was read is used.
func (w *failWalker) check(what string, err error) error {
	if err == nil || err == io.EOF {
		return nil
	}
	if w.limitErr != nil {
		return w.limitErr
	}
	if limIsClassified(err) && !errors.Is(err, ErrMalformed) {
		return err
	}
	w.noteBroken(what, err)
	return nil
}

// fatal classifies an error that ends the walk.
func (w *failWalker) fatal(what string, err error) error {
	if w.limitErr != nil {
		return w.limitErr
	}
	if limIsClassified(err) {
		return err
	}
	return fmt.Errorf("dmarc: %s: %w: %w", what, ErrMalformed, err)
}

// noteBroken remembers the first MIME structure error.
func (w *failWalker) noteBroken(what string, err error) {
	if w.broken == nil {
		if errors.Is(err, ErrMalformed) {
			w.broken = fmt.Errorf("dmarc: %s: %w", what, err)
		} else {
			w.broken = fmt.Errorf("dmarc: %s: %w: %w", what, ErrMalformed, err)
		}
	}
}

// failWatch remembers the first limit or source error that passes through,
// because the MIME reader flattens the errors it returns into text.
type failWatch struct {
	r io.Reader
	w *failWalker
}

func (f failWatch) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF && f.w.limitErr == nil && limIsClassified(err) && !errors.Is(err, ErrMalformed) {
		f.w.limitErr = err
	}
	return n, err
}

// failBufs recycles the buffers header blocks and parts are read into
// before they become one string: most reports are small, and a buffer
// grown for each would be most of the garbage of a walk.
var failBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// failLineBufs recycles the readers of original messages: small, because
// what they read ahead of the header is body, which is only skipped.
var failLineBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// failMaxPooled is the largest buffer put back into failBufs.
const failMaxPooled = 64 << 10

func failGetBuf() *bytes.Buffer { return failBufs.Get().(*bytes.Buffer) }

func failPutBuf(b *bytes.Buffer) {
	if b.Cap() <= failMaxPooled {
		b.Reset()
		failBufs.Put(b)
	}
}

// failReadString reads r to its end, at most limit bytes.
func failReadString(r io.Reader, limit int64) (string, error) {
	b := failGetBuf()
	defer failPutBuf(b)
	_, err := b.ReadFrom(io.LimitReader(r, limit))
	return b.String(), err
}

// failReadBlock reads a header block: lines up to a blank line (consumed)
// or the end of input. A block over failMaxBlock bytes is ErrTooLarge. On a
// read error it returns what it read with the error.
func failReadBlock(br *bufio.Reader) (string, error) {
	block := failGetBuf()
	defer failPutBuf(block)
	lineStart := true
	for {
		chunk, err := br.ReadSlice('\n')
		if lineStart && err == nil && (len(chunk) == 1 || len(chunk) == 2 && chunk[0] == '\r') {
			return block.String(), nil
		}
		if block.Len()+len(chunk) > failMaxBlock {
			return "", fmt.Errorf("dmarc: header block larger than %d bytes: %w", failMaxBlock, ErrTooLarge)
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

// pair gives each feedback part the nearest original and returns the
// feedback parts in order. With as many originals as feedback parts they
// pair in order (reports may list every feedback part first); otherwise
// each feedback part takes the closest unclaimed original, the next one on
// a tie.
func (w *failWalker) pair() []*failItem {
	var fbs, origs []int
	for i, it := range w.items {
		if it.isOrig {
			origs = append(origs, i)
		} else {
			fbs = append(fbs, i)
		}
	}
	out := make([]*failItem, 0, len(fbs))
	if len(fbs) == len(origs) {
		for k, i := range fbs {
			w.items[i].orig = w.items[origs[k]].orig
			out = append(out, w.items[i])
		}
		return out
	}
	claimed := make([]bool, len(w.items))
	for _, i := range fbs {
		best := -1
		for _, j := range origs {
			if claimed[j] {
				continue
			}
			if best < 0 || failDist(i, j) < failDist(i, best) || failDist(i, j) == failDist(i, best) && j > i {
				best = j
			}
		}
		if best >= 0 {
			claimed[best] = true
			w.items[i].orig = w.items[best].orig
		}
		out = append(out, w.items[i])
	}
	return out
}

func failDist(a, b int) int {
	if a > b {
		return a - b
	}
	return b - a
}
