package ingest

import (
	"errors"
	"fmt"
	"io"
)

// keepBlock is the size of the blocks the bytes of an input are kept in:
// blocks rather than one growing slice, so keeping costs no copies.
const keepBlock = 64 << 10

// input wraps the caller's reader. It remembers the first error of the
// reader itself (which fails the input instead of quarantining it: the
// bytes are not all there) and keeps the bytes read, up to a limit, in case
// the input must be quarantined. A reader that can seek (a file, a
// bytes.Reader) is not copied: it is read again if needed.
type input struct {
	r     io.Reader
	seek  io.ReadSeeker
	start int64
	max   int64
	kept  [][]byte
	keptN int64
	n     int64 // bytes read in all
	err   error // first error of r other than io.EOF
}

func newInput(r io.Reader, max int64) *input {
	in := &input{r: r, max: max}
	if s, ok := r.(io.ReadSeeker); ok {
		if pos, err := s.Seek(0, io.SeekCurrent); err == nil {
			in.seek, in.start = s, pos
		}
	}
	return in
}

func (in *input) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	in.n += int64(n)
	if n > 0 && in.seek == nil && in.keptN < in.max {
		in.keep(p[:min(int64(n), in.max-in.keptN)])
	}
	if err != nil && err != io.EOF && in.err == nil {
		in.err = err
	}
	return n, err
}

func (in *input) keep(p []byte) {
	in.keptN += int64(len(p))
	for len(p) > 0 {
		if len(in.kept) == 0 || len(in.kept[len(in.kept)-1]) == keepBlock {
			in.kept = append(in.kept, make([]byte, 0, keepBlock))
		}
		last := &in.kept[len(in.kept)-1]
		n := min(len(p), keepBlock-len(*last))
		*last = append(*last, p[:n]...)
		p = p[n:]
	}
}

// failed returns the reader's own error, if it had one.
func (in *input) failed() error {
	if in.err == nil {
		return nil
	}
	return fmt.Errorf("ingest: reading input: %w", in.err)
}

// raw returns the first max bytes of the input and its whole size, reading
// what the parser left unread.
func (in *input) raw() ([]byte, int64, error) {
	if in.seek != nil {
		return in.reread()
	}
	if _, err := io.Copy(io.Discard, in); err != nil {
		return nil, 0, fmt.Errorf("ingest: reading input: %w", err)
	}
	if err := in.failed(); err != nil {
		return nil, 0, err
	}
	raw := make([]byte, 0, in.keptN)
	for _, b := range in.kept {
		raw = append(raw, b...)
	}
	in.kept = nil
	return raw, in.n, nil
}

func (in *input) reread() ([]byte, int64, error) {
	end, err := in.seek.Seek(0, io.SeekEnd)
	if err == nil {
		_, err = in.seek.Seek(in.start, io.SeekStart)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ingest: re-reading input: %w", err)
	}
	size := end - in.start
	raw := make([]byte, min(size, in.max))
	if _, err := io.ReadFull(in.seek, raw); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, 0, fmt.Errorf("ingest: re-reading input: %w", err)
	}
	return raw, size, nil
}
