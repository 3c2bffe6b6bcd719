package smtp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// spoolMemBytes is how much of a message a spool keeps in memory before it
// moves the rest to a temporary file: report mails are small (a few KiB,
// a few MiB for the largest receivers), so most never touch the disk,
// while 100 connections sending 50 MiB each do not sit in memory.
const spoolMemBytes = 1 << 20

// spool holds one received message so that it can be read again for each
// recipient domain, and so that the pipeline reads from local memory or
// disk instead of the sender's connection.
type spool struct {
	dir  string
	mem  []byte
	file *os.File
	size int64
}

func newSpool(dir string) *spool { return &spool{dir: dir} }

// ReadFrom copies r into the spool; the error is r's (unwrapped, so that
// callers can compare it) or the temporary file's.
func (s *spool) ReadFrom(r io.Reader) (int64, error) {
	buf := make([]byte, 32<<10)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := s.write(buf[:n]); werr != nil {
				return total, werr
			}
			total += int64(n)
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (s *spool) write(p []byte) error {
	s.size += int64(len(p))
	if s.file == nil && len(s.mem)+len(p) <= spoolMemBytes {
		s.mem = append(s.mem, p...)
		return nil
	}
	if s.file == nil {
		f, err := os.CreateTemp(s.dir, "dmarcd-smtp-*.eml")
		if err != nil {
			return fmt.Errorf("ingest: spooling a message: %w", err)
		}
		s.file = f
	}
	if _, err := s.file.Write(p); err != nil {
		return fmt.Errorf("ingest: spooling a message: %w", err)
	}
	return nil
}

// Size is the number of bytes spooled.
func (s *spool) Size() int64 { return s.size }

// Reader returns a new reader of the whole message.
func (s *spool) Reader() io.Reader {
	mem := bytes.NewReader(s.mem)
	if s.file == nil {
		return mem
	}
	return io.MultiReader(mem, io.NewSectionReader(s.file, 0, s.size-int64(len(s.mem))))
}

// Close removes the temporary file, if any.
func (s *spool) Close() error {
	if s.file == nil {
		return nil
	}
	name := s.file.Name()
	err := s.file.Close()
	if rerr := os.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	s.file = nil
	return err
}
