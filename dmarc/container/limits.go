package container

import (
	"errors"
	"fmt"
	"io"
)

// Errors returned by the container walkers and the report readers built on
// them (aggregate, arf). Every error they return wraps one of these (test
// with errors.Is), except errors of the caller's own io.Reader, which come
// back wrapped but unchanged.
var (
	// ErrNoReport means the input holds no report of the kind looked for:
	// an empty input, a mail without a report part, XML without a
	// <feedback> element.
	ErrNoReport = errors.New("no DMARC report found")
	// ErrTooLarge means the input exceeds one of the Limits.
	ErrTooLarge = errors.New("report exceeds size limits")
	// ErrMalformed means the input is broken beyond recovery: truncated XML
	// or archives, a DTD, corrupt compressed data, a broken MIME structure.
	ErrMalformed = errors.New("malformed report")
)

// NoReport returns an error that is ErrNoReport (errors.Is) and says
// only msg, "dmarc: no aggregate report in the input" say, rather than
// msg followed by ErrNoReport's own words, which say the same again.
func NoReport(msg string) error { return &noReportError{msg: msg} }

type noReportError struct{ msg string }

func (e *noReportError) Error() string        { return e.msg }
func (e *noReportError) Is(target error) bool { return target == ErrNoReport }

// Limits bounds the work and memory spent on one input. A zero field means
// its default (see DefaultLimits), so Limits{} is the same as DefaultLimits().
type Limits struct {
	MaxCompressed   int64 // bytes of one compressed input/member read (default 64 MiB)
	MaxDecompressed int64 // bytes of payload (XML) produced from one input (default 1 GiB)
	MaxRatio        int64 // decompressed/compressed ratio allowed once past 1 MiB of output (default 1000)
	MaxRecords      int   // records per report (default 5,000,000)
	MaxMembers      int   // zip members (default 100)
	MaxDepth        int   // MIME / container nesting (default 8)
}

// Default limits, see Limits.
const (
	defaultMaxCompressed   = 64 << 20
	defaultMaxDecompressed = 1 << 30
	defaultMaxRatio        = 1000
	defaultMaxRecords      = 5_000_000
	defaultMaxMembers      = 100
	defaultMaxDepth        = 8

	// ratioGrace is the output a decompressor may produce before the
	// ratio check applies: small inputs (a 200-byte gzip of a 1 KiB
	// report) legitimately have high ratios and tiny absolute sizes.
	ratioGrace = 1 << 20
)

// DefaultLimits returns the limits used for reports received from the
// Internet: generous for the largest real reports, small enough that a
// zip or gzip bomb is refused after about a megabyte of output.
func DefaultLimits() Limits {
	return Limits{
		MaxCompressed:   defaultMaxCompressed,
		MaxDecompressed: defaultMaxDecompressed,
		MaxRatio:        defaultMaxRatio,
		MaxRecords:      defaultMaxRecords,
		MaxMembers:      defaultMaxMembers,
		MaxDepth:        defaultMaxDepth,
	}
}

// WithDefaults returns l with zero (or negative) fields set to their
// defaults.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxCompressed <= 0 {
		l.MaxCompressed = d.MaxCompressed
	}
	if l.MaxDecompressed <= 0 {
		l.MaxDecompressed = d.MaxDecompressed
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = d.MaxRatio
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = d.MaxRecords
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = d.MaxMembers
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// capReader returns ErrTooLarge once more than max bytes were read, so
// that an oversized input is refused rather than silently cut short (which
// would look like a truncated report). n counts the bytes read so far; max
// may be changed between reads (a walker lowers it once it knows the kind).
type capReader struct {
	r    io.Reader
	n    int64
	max  int64
	what string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		// Probe for one more byte: an input of exactly max bytes is fine.
		var one [1]byte
		if k, err := io.ReadFull(c.r, one[:]); k == 0 {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, err
		}
		return 0, fmt.Errorf("dmarc: %s larger than %d bytes: %w", c.what, c.max, ErrTooLarge)
	}
	if rest := c.max - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// CapReader returns a reader of r that returns ErrTooLarge once more than
// max bytes were read (what names the input in the error), so that an
// oversized input is refused rather than silently cut short.
func CapReader(r io.Reader, max int64, what string) io.Reader {
	return &capReader{r: r, max: max, what: what}
}

// lower sets a smaller limit once the kind of input is known; the bytes
// already read (sniffing) count against it.
func (c *capReader) lower(max int64, what string) error {
	c.max, c.what = max, what
	if c.n > max {
		return fmt.Errorf("dmarc: %s larger than %d bytes: %w", what, max, ErrTooLarge)
	}
	return nil
}

// ratioReader refuses decompressed output that grows past MaxRatio times
// the compressed input once ratioGrace bytes came out. in reports the
// compressed bytes consumed so far (or the declared compressed size).
type ratioReader struct {
	r     io.Reader
	in    func() int64
	out   int64
	ratio int64
	what  string
}

func (l *ratioReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.out += int64(n)
	if l.out > ratioGrace {
		in := l.in()
		if in <= 0 || l.out/in > l.ratio {
			return n, fmt.Errorf("dmarc: %s expands more than %d:1 (%d bytes from %d): %w",
				l.what, l.ratio, l.out, in, ErrTooLarge)
		}
	}
	return n, err
}

// budgetReader charges every byte read against a budget shared by all
// the payloads of one input (MaxDecompressed).
type budgetReader struct {
	r      io.Reader
	budget *int64
	max    int64
	what   string // the payload's format, for errors ("XML")
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if *b.budget <= 0 {
		var one [1]byte
		if k, err := io.ReadFull(b.r, one[:]); k == 0 {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, err
		}
		return 0, fmt.Errorf("dmarc: %s larger than %d bytes: %w", b.what, b.max, ErrTooLarge)
	}
	if int64(len(p)) > *b.budget {
		p = p[:*b.budget]
	}
	n, err := b.r.Read(p)
	*b.budget -= int64(n)
	return n, err
}

// sourceError marks an error of the caller's own reader, so that the
// walkers pass it through instead of calling the input malformed.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// sourceReader tags the errors of the caller's reader (see sourceError).
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &sourceError{err}
	}
	return n, err
}

// isClassified reports whether err already says what went wrong: one of
// the sentinel errors, or an error of the caller's reader.
func isClassified(err error) bool {
	var se *sourceError
	return errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed) ||
		errors.Is(err, ErrNoReport) || errors.As(err, &se)
}

// malformedReader turns the errors of a decoder (gzip, flate, zip,
// base64...) into ErrMalformed, keeping io.EOF and already classified errors.
type malformedReader struct {
	r    io.Reader
	what string
}

func (m malformedReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && err != io.EOF && !isClassified(err) {
		err = fmt.Errorf("dmarc: %s: %w: %w", m.what, ErrMalformed, err)
	}
	return n, err
}
