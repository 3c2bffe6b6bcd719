package arf

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// A failure report mail is walked by container.MIMEWalker, the walker all
// report mail shares; this file decides what is kept of each part:
// feedback parts are read whole (at most failMaxFeedback), original
// messages only up to the end of their header (the walker reads it; the
// multipart reader skips the rest of the part as it streams past),
// text/plain parts only a prefix. Other parts are skipped unread.

// failMaxItems bounds the feedback and original parts remembered for one
// mail; pairing them is quadratic.
const failMaxItems = 1000

// failMail is what the walk knows about the mail a part belongs to (the
// report mail, or a report mail forwarded inside it).
type failMail struct {
	fromDomain string // domain of its From header
	subject    string
	date       time.Time // its Date header, UTC; zero when absent or unparseable
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

// failWalker collects the parts of one failure report mail.
type failWalker struct {
	mime  *container.MIMEWalker
	items []*failItem
	texts []failTextPart
	top   *failMail

	lastMsg  *container.Message // the message mailOf answered for last, and its answer:
	lastMail *failMail          // parts come in runs of one message
}

// run walks the mail read from r.
func (w *failWalker) run(r io.Reader, lim container.Limits) error {
	w.mime = container.NewMIMEWalker(lim, w.part)
	err := w.mime.Walk(r, "failure report mail")
	if m := w.mime.Top(); m != nil {
		w.top = w.mailOf(m)
	}
	return err
}

// mailOf returns what a part needs to know about message m.
func (w *failWalker) mailOf(m *container.Message) *failMail {
	if m != w.lastMsg {
		w.lastMsg = m
		w.lastMail = &failMail{fromDomain: failAddrDomain(m.Header.Get("From")), subject: container.DecodeHeader(m.Header.Get("Subject"))}
		if t, ok := ParseDate(m.Header.Get("Date")); ok {
			w.lastMail.date = t
		}
	}
	return w.lastMail
}

// part handles a leaf part by type. A message/rfc822 part that is itself
// a multipart/report is a forwarded report mail and is walked.
func (w *failWalker) part(p *container.Part) error {
	switch p.Type {
	case "message/feedback-report":
		return w.feedback(p)
	case "message/rfc822", "message/global":
		if mt, _ := container.MediaType(p.Embedded.Header.Get("Content-Type")); mt == "multipart/report" {
			return p.Walk()
		}
		return w.original(p)
	case "text/rfc822-headers", "message/rfc822-headers", "message/global-headers":
		return w.original(p)
	case "text/plain":
		return w.text(p)
	}
	return nil
}

// feedback reads a message/feedback-report part: at most failMaxFeedback
// bytes, so that a huge one costs no more than that to refuse.
func (w *failWalker) feedback(p *container.Part) error {
	data, err := container.ReadString(p.Body, failMaxFeedback+1)
	if len(data) > failMaxFeedback {
		return fmt.Errorf("dmarc: feedback report part larger than %d bytes: %w", failMaxFeedback, container.ErrTooLarge)
	}
	if err := w.mime.Check("feedback report part", err); err != nil {
		return err
	}
	return w.add(&failItem{fields: container.ParseFields(data), mail: w.mailOf(p.Message)})
}

// original keeps the header of an original message (message/rfc822) or a
// header block (text/rfc822-headers).
func (w *failWalker) original(p *container.Part) error {
	if len(p.Embedded.Header) == 0 {
		return nil
	}
	return w.add(&failItem{isOrig: true, orig: p.Embedded.Header, mail: w.mailOf(p.Message)})
}

func (w *failWalker) add(it *failItem) error {
	if len(w.items) >= failMaxItems {
		return fmt.Errorf("dmarc: more than %d feedback and original parts in one mail: %w", failMaxItems, container.ErrTooLarge)
	}
	w.items = append(w.items, it)
	return nil
}

// text keeps the beginning of a text/plain part for the plain-text
// fallback, converted to UTF-8.
func (w *failWalker) text(p *container.Part) error {
	if len(w.texts) >= failMaxTexts {
		return nil
	}
	body := p.Body
	if cs := strings.ToLower(p.Params["charset"]); cs != "" && cs != "us-ascii" && cs != "utf-8" {
		if r, err := container.CharsetReader(cs, body); err == nil {
			body = r
		}
	}
	data, err := container.ReadString(body, failMaxText)
	if err := w.mime.Check("text part", err); err != nil {
		return err
	}
	w.texts = append(w.texts, failTextPart{text: strings.ToValidUTF8(data, "\uFFFD"), mail: w.mailOf(p.Message)})
	return nil
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
