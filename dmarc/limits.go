package dmarc

import (
	"errors"
	"fmt"
	"io"
)

// Errors returned by the aggregate report readers. Every error they return
// wraps one of these (test with errors.Is), except errors of the caller's own
// io.Reader, which come back wrapped but unchanged.
var (
	// ErrNoReport means the input holds no DMARC aggregate report: an empty
	// input, a mail without a report part, XML without a <feedback> element.
	ErrNoReport = errors.New("no DMARC report found")
	// ErrTooLarge means the input exceeds one of the Limits.
	ErrTooLarge = errors.New("report exceeds size limits")
	// ErrMalformed means the input is broken beyond recovery: truncated XML
	// or archives, a DTD, corrupt compressed data, a broken MIME structure.
	ErrMalformed = errors.New("malformed report")
)

// Limits bounds the work and memory spent on one input. A zero field means
// its default (see DefaultLimits), so Limits{} is the same as DefaultLimits().
type Limits struct {
	MaxCompressed   int64 // bytes of one compressed input/member read (default 64 MiB)
	MaxDecompressed int64 // bytes of XML produced from one input (default 1 GiB)
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

	// limRatioGrace is the output a decompressor may produce before the
	// ratio check applies: small inputs (a 200-byte gzip of a 1 KiB
	// report) legitimately have high ratios and tiny absolute sizes.
	limRatioGrace = 1 << 20
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

// withDefaults fills zero (or negative) fields with their defaults.
func (l Limits) withDefaults() Limits {
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

// limCapReader returns ErrTooLarge once more than max bytes were read, so
// that an oversized input is refused rather than silently cut short (which
// would look like a truncated report). n counts the bytes read so far; max
// may be changed between reads (a walker lowers it once it knows the kind).
type limCapReader struct {
	r    io.Reader
	n    int64
	max  int64
	what string
}

func (c *limCapReader) Read(p []byte) (int, error) {
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

// lower sets a smaller limit once the kind of input is known; the bytes
// already read (sniffing) count against it.
func (c *limCapReader) lower(max int64, what string) error {
	c.max, c.what = max, what
	if c.n > max {
		return fmt.Errorf("dmarc: %s larger than %d bytes: %w", what, max, ErrTooLarge)
	}
	return nil
}

// limRatioReader refuses decompressed output that grows past MaxRatio times
// the compressed input once limRatioGrace bytes came out. in reports the
// compressed bytes consumed so far (or the declared compressed size).
type limRatioReader struct {
	r     io.Reader
	in    func() int64
	out   int64
	ratio int64
	what  string
}

func (l *limRatioReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.out += int64(n)
	if l.out > limRatioGrace {
		in := l.in()
		if in <= 0 || l.out/in > l.ratio {
			return n, fmt.Errorf("dmarc: %s expands more than %d:1 (%d bytes from %d): %w",
				l.what, l.ratio, l.out, in, ErrTooLarge)
		}
	}
	return n, err
}

// limBudgetReader charges every byte read against a budget shared by all
// the payloads of one input (MaxDecompressed).
type limBudgetReader struct {
	r      io.Reader
	budget *int64
	max    int64
}

func (b *limBudgetReader) Read(p []byte) (int, error) {
	if *b.budget <= 0 {
		var one [1]byte
		if k, err := io.ReadFull(b.r, one[:]); k == 0 {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, err
		}
		return 0, fmt.Errorf("dmarc: XML larger than %d bytes: %w", b.max, ErrTooLarge)
	}
	if int64(len(p)) > *b.budget {
		p = p[:*b.budget]
	}
	n, err := b.r.Read(p)
	*b.budget -= int64(n)
	return n, err
}

// limSourceError marks an error of the caller's own reader, so that the
// walkers pass it through instead of calling the input malformed.
type limSourceError struct{ err error }

func (e *limSourceError) Error() string { return e.err.Error() }
func (e *limSourceError) Unwrap() error { return e.err }

// limSourceReader tags the errors of the caller's reader (see limSourceError).
type limSourceReader struct{ r io.Reader }

func (s limSourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &limSourceError{err}
	}
	return n, err
}

// limIsClassified reports whether err already says what went wrong: one of
// the sentinel errors, or an error of the caller's reader.
func limIsClassified(err error) bool {
	var se *limSourceError
	return errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed) ||
		errors.Is(err, ErrNoReport) || errors.As(err, &se)
}

// limMalformedReader turns the errors of a decoder (gzip, flate, zip,
// base64...) into ErrMalformed, keeping io.EOF and already classified errors.
type limMalformedReader struct {
	r    io.Reader
	what string
}

func (m limMalformedReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && err != io.EOF && !limIsClassified(err) {
		err = fmt.Errorf("dmarc: %s: %w: %w", m.what, ErrMalformed, err)
	}
	return n, err
}
