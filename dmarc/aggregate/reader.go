package aggregate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// NamespaceRFC9990 is the XML namespace of RFC 9990 (DMARCbis) aggregate
// reports. RFC 7489 reports have none.
const NamespaceRFC9990 = "urn:ietf:params:xml:ns:dmarc-2.0"

// Header is what an aggregate report says about itself: its
// report_metadata, its policy_published and its version. Strings are
// trimmed of white space and hold valid UTF-8.
type Header struct {
	Version   string // <version> as written: "1.0", "2.0" or ""
	Namespace string // namespace of <feedback>: "", NamespaceRFC9990, or what the reporter declared

	OrgName          string
	Email            string // without surrounding angle brackets
	ExtraContactInfo string
	ReportID         string // without surrounding angle brackets
	// DateBegin and DateEnd are in UTC; they are the zero time when the
	// report has no date_range (callers that need a period must check).
	DateBegin, DateEnd time.Time
	Errors             []string // report_metadata/error, empty ones dropped
	Generator          string   // RFC 9990 report_metadata/generator

	Policy PolicyPublished
}

// PolicyPublished is the DMARC policy the reporter found for the domain.
// Enumerated values are lower-cased; a tag the report leaves out is "".
type PolicyPublished struct {
	Domain          string // lower-cased
	P, SP, NP       string
	PCT             *int // nil when absent or not a number
	ADKIM, ASPF, FO string
	Testing         string // RFC 9990 t= flag: "y", "n" or ""
	DiscoveryMethod string // RFC 9990: "psl", "treewalk" or ""
}

// Record is one <record> of an aggregate report: a source IP and the
// messages it sent with one set of results. Enumerated values are trimmed
// and lower-cased (unknown values are kept, lower-cased); domains are
// lower-cased.
type Record struct {
	SourceIP    netip.Addr // IPv4-mapped IPv6 addresses are unmapped to IPv4
	Count       int64      // may be 0
	Disposition string     // none, quarantine, reject, pass (RFC 9990), or what the reporter wrote
	DKIM, SPF   string     // policy_evaluated results: pass, fail, ...
	Reasons     []PolicyReason

	HeaderFrom, EnvelopeFrom, EnvelopeTo string

	DKIMResults []DKIMResult
	SPFResults  []SPFResult
}

// PolicyReason is a policy_evaluated/reason: why the disposition differs
// from the published policy (forwarded, local_policy, ...).
type PolicyReason struct {
	Type, Comment string
}

// DKIMResult is one auth_results/dkim entry.
type DKIMResult struct {
	Domain, Selector, Result, HumanResult string
}

// SPFResult is one auth_results/spf entry. Scope is "mfrom", "helo" or "".
type SPFResult struct {
	Domain, Scope, Result, HumanResult string
}

// DMARCPass reports whether the record's messages passed DMARC: the
// policy_evaluated DKIM or SPF result is pass (aligned, as the reporter
// evaluated it).
func (r *Record) DMARCPass() bool {
	return r.DKIM == "pass" || r.SPF == "pass"
}

// Reader decodes an aggregate report as a stream: the header first,
// then one record per call to Next, in memory that does not grow with the
// number of records. It reads RFC 7489 and RFC 9990 reports, with or without
// namespace, and recovers from the breakage real reporters produce (see
// xmlscan.go and convert.go for each decision).
//
// Record order rules: report_metadata and policy_published come before the
// first <record> in every real report, so the header is complete when
// NewReader returns. A report_metadata or policy_published after a
// record is refused with container.ErrMalformed: accepting it would mean holding every
// record until the end of the input (unbounded memory) or handing out a
// header that changes under the caller. A <version> after a record is
// ignored. Repeated header sections merge (the last value of each field
// wins), as encoding/xml would decode them.
//
// A report cut short (the input ends before </feedback>) makes Next return
// container.ErrMalformed after the records read so far: the caller decides, and should
// not store a report whose Next did not end with io.EOF.
type Reader struct {
	d        aggDecoder
	hdr      *Header
	err      error
	skipped  int
	warnings []string
	bufs     *readerBufs // returned to readerPool by Release
}

// readerBufs are a Reader's read buffers: about 8 KB that every report,
// however small, needed anew. Release hands them to the next Reader.
type readerBufs struct {
	br  *bufio.Reader
	buf []byte
}

var readerPool = sync.Pool{New: func() any { return &readerBufs{br: bufio.NewReaderSize(nil, 4096)} }}

// maxPooledBuf is the largest scanner buffer kept for the next Reader: one
// grown for a huge token is dropped.
const maxPooledBuf = 64 << 10

// errReleased is what a Reader returns once released.
var errReleased = errors.New("dmarc: aggregate reader used after Release")

// Release hands the Reader's buffers to the next NewReader. The Header and
// the records returned stay valid; the Reader itself must not be used
// again (Next then fails). Calling it is optional: a Reader not released
// is collected as any other value.
func (a *Reader) Release() {
	b := a.bufs
	if b == nil {
		return
	}
	a.bufs = nil
	b.br.Reset(nil)
	b.buf = nil
	if buf := a.d.s.buf; cap(buf) <= maxPooledBuf {
		b.buf = buf[:cap(buf)]
	}
	a.d.s.buf, a.d.s.r = nil, nil
	a.err = errReleased
	readerPool.Put(b)
}

// aggMaxWarnings bounds the warnings kept by an Reader.
const aggMaxWarnings = 20

// NewReader reads r up to the first <record> and returns a reader
// whose Header is complete. r must yield the XML itself (see
// Extract for gzip, zip and mail); its character set is decoded
// from a byte order mark or the XML declaration. lim bounds the bytes read
// (MaxDecompressed) and the records (MaxRecords); zero fields mean defaults.
//
// Errors: container.ErrNoReport when the XML has no <feedback> element (an empty
// input too), container.ErrMalformed for a DTD, a report cut short before its first
// record, or an unreadable date_range, container.ErrTooLarge past the limits. Errors of
// r itself are returned wrapped.
func NewReader(r io.Reader, lim container.Limits) (*Reader, error) {
	lim = lim.WithDefaults()
	b := readerPool.Get().(*readerBufs)
	a := &Reader{bufs: b}
	a.d.s.buf = b.buf
	b.br.Reset(container.CapReader(r, lim.MaxDecompressed, "XML"))
	a.d.init(xsDecodeCharset(b.br), lim)
	for !a.d.recordStarted && !a.d.done {
		if err := a.d.step(); err != nil {
			a.Release()
			return nil, err
		}
	}
	h, err := aggBuildHeader(a.d.version, a.d.namespace, &a.d.meta, &a.d.policy)
	if err != nil {
		a.Release()
		return nil, err
	}
	a.hdr = h
	return a, nil
}

// Header returns the report's header. It is complete from the start.
func (a *Reader) Header() *Header { return a.hdr }

// Next returns the next record, or io.EOF after the last one. A record whose
// source_ip or count cannot be read is skipped, not returned: it cannot be
// attributed to a sender or weighed, and one broken row should not cost the
// rest of the report; Skipped and Warnings tell the caller about it.
//
// Errors: container.ErrTooLarge past MaxRecords records or MaxDecompressed bytes;
// container.ErrMalformed when the report is cut short or refused (see
// Reader); errors of the underlying reader, wrapped. After an
// error, Next keeps returning it.
func (a *Reader) Next() (*Record, error) {
	if a.err != nil {
		return nil, a.err
	}
	d := &a.d
	for {
		if d.recordDone {
			d.recordDone = false
			rec, problem := d.rec.finish()
			if rec != nil {
				return rec, nil
			}
			a.skip(d.records, problem)
			continue
		}
		if d.done {
			a.err = io.EOF
			return nil, io.EOF
		}
		d.recordStarted = false
		if err := d.step(); err != nil {
			a.err = err
			return nil, err
		}
	}
}

// Skipped returns how many records Next has skipped so far because their
// source_ip or count could not be read.
func (a *Reader) Skipped() int { return a.skipped }

// Warnings returns a description of the first skipped records (at most 20).
func (a *Reader) Warnings() []string { return a.warnings }

func (a *Reader) skip(n int, problem string) {
	a.skipped++
	if len(a.warnings) < aggMaxWarnings {
		a.warnings = append(a.warnings, fmt.Sprintf("record %d skipped: %s", n, problem))
	}
}

// Parse reads a whole report into memory: a convenience for tests
// and small inputs; use Reader for anything that may be large.
// On error the header is returned when it was read, the records never:
// a report cut short must not be half-stored by accident. Errors are those
// of NewReader and Next.
func Parse(r io.Reader, lim container.Limits) (*Header, []Record, error) {
	a, err := NewReader(r, lim)
	if err != nil {
		return nil, nil, err
	}
	defer a.Release()
	var recs []Record
	for {
		rec, err := a.Next()
		if err == io.EOF {
			return a.Header(), recs, nil
		}
		if err != nil {
			return a.Header(), nil, err
		}
		recs = append(recs, *rec)
	}
}
