package imports

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxMboxMessage is the size of the largest message MboxReader returns;
// a larger one is an error (ErrMboxMessageTooLarge) and the reader moves
// on to the next message.
const MaxMboxMessage = 64 << 20

// ErrMboxMessageTooLarge is returned by MboxReader.Next for a message over
// MaxMboxMessage bytes; the next call goes on with the following message.
var ErrMboxMessageTooLarge = errors.New("ingest: mbox message larger than 64 MiB")

var mboxFrom = []byte("From ")

// IsMbox reports whether head, the first bytes of a file, starts like an
// mbox file: a "From " separator line. Mail files (.eml) start with a
// header field, report files with XML or compressed data, so this line
// is what tells them apart.
func IsMbox(head []byte) bool {
	return bytes.HasPrefix(head, mboxFrom)
}

// MboxReader splits an mbox file into its messages, one at a time, in any
// of the mbox variants: a line starting with "From " begins a message, and
// the mboxrd/mboxo quoting of such lines inside a message (">From ",
// ">>From ", ...) loses one '>'. Line endings are kept as they are.
type MboxReader struct {
	r       *bufio.Reader
	started bool // the first separator line was read
	pending bool // a separator line was read and its message not yet
	n       int  // messages returned
	max     int  // MaxMboxMessage; tests lower it
}

// NewMboxReader returns a reader of the messages of the mbox file r.
func NewMboxReader(r io.Reader) *MboxReader {
	return &MboxReader{r: bufio.NewReaderSize(r, 64<<10), max: MaxMboxMessage}
}

// Next returns the next message without its separator line and without
// the empty line that ends it, or io.EOF after the last. A file that does
// not start with a separator line is an error, as is a read error of the
// underlying reader (returned wrapped). A message over MaxMboxMessage
// returns ErrMboxMessageTooLarge; Next may be called again after it.
func (m *MboxReader) Next() ([]byte, error) {
	if !m.started {
		m.started = true
		line, err := m.readLine()
		if len(line) == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		if !bytes.HasPrefix(line, mboxFrom) {
			return nil, errors.New("ingest: not an mbox file: the first line is not a \"From \" line")
		}
		if err == nil {
			err = m.skipRestOfLine(line)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("ingest: reading mbox: %w", err)
		}
		m.pending = err == nil
	}
	if !m.pending {
		return nil, io.EOF
	}
	m.pending = false
	var msg []byte
	tooLarge := false
	atLineStart := true
	for {
		line, err := m.readLine()
		if atLineStart && bytes.HasPrefix(line, mboxFrom) {
			if err == nil {
				err = m.skipRestOfLine(line)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("ingest: reading mbox: %w", err)
			}
			m.pending = err == nil
			break
		}
		if atLineStart {
			line = unquoteFrom(line)
		}
		if !tooLarge {
			if len(msg)+len(line) > m.max {
				tooLarge, msg = true, nil
			} else {
				msg = append(msg, line...)
			}
		}
		// A line longer than the buffer comes back in pieces: only the
		// first piece starts a line.
		atLineStart = len(line) > 0 && line[len(line)-1] == '\n'
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("ingest: reading mbox: %w", err)
		}
	}
	m.n++
	if tooLarge {
		return nil, fmt.Errorf("ingest: mbox message %d: %w", m.n, ErrMboxMessageTooLarge)
	}
	return trimSeparatorBlank(msg), nil
}

// More reports whether another message follows the one Next returned: when
// it is false, the next Next returns io.EOF. (When true, Next returns a
// message, maybe empty, or an error.)
func (m *MboxReader) More() bool { return m.pending }

// readLine returns the next line with its ending, or a piece of a line
// longer than the buffer; err is io.EOF with the last, unterminated bytes.
func (m *MboxReader) readLine() ([]byte, error) {
	line, err := m.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		err = nil
	}
	return line, err
}

// skipRestOfLine reads past the end of a line longer than the buffer,
// of which piece was the first part.
func (m *MboxReader) skipRestOfLine(piece []byte) error {
	for len(piece) == 0 || piece[len(piece)-1] != '\n' {
		var err error
		if piece, err = m.readLine(); err != nil {
			return err
		}
	}
	return nil
}

// unquoteFrom removes one '>' from a line of the form ">*From " (mboxrd).
func unquoteFrom(line []byte) []byte {
	i := 0
	for i < len(line) && line[i] == '>' {
		i++
	}
	if i > 0 && bytes.HasPrefix(line[i:], mboxFrom) {
		return line[1:]
	}
	return line
}

// trimSeparatorBlank drops the empty line that mbox writers put between a
// message and the next separator.
func trimSeparatorBlank(msg []byte) []byte {
	switch {
	case bytes.HasSuffix(msg, []byte("\r\n\r\n")):
		return msg[:len(msg)-2]
	case bytes.HasSuffix(msg, []byte("\n\n")):
		return msg[:len(msg)-1]
	}
	return msg
}
