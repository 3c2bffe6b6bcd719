package httpapi

import (
	"net/http"
)

// streamChunk is how much of a streamed body is gathered before it is sent.
// It bounds the memory of a stream, and nothing reaches the client before
// the first chunk is full, so most failures (a report deleted meanwhile, a
// store error on the first read) can still be answered with an error body.
const streamChunk = 32 << 10

// streamWriter sends a 200 body of unknown length in chunks. Use it as an
// io.Writer, then call close on success or fail on error.
type streamWriter struct {
	w       http.ResponseWriter
	header  http.Header // set on the response when the first chunk goes out
	buf     []byte
	started bool
	err     error // the first failed write to the client
}

// newStream returns a stream whose success response carries header.
func newStream(w http.ResponseWriter, header http.Header) *streamWriter {
	return &streamWriter{w: w, header: header, buf: make([]byte, 0, streamChunk+streamChunk/4)}
}

// Write gathers p and sends a chunk when enough is gathered. Its error is
// the client's: the connection failed and the caller should stop.
func (s *streamWriter) Write(p []byte) (int, error) {
	if s.err == nil {
		s.buf = append(s.buf, p...)
	}
	return s.gathered(len(p))
}

// WriteString is Write for a string.
func (s *streamWriter) WriteString(p string) (int, error) {
	if s.err == nil {
		s.buf = append(s.buf, p...)
	}
	return s.gathered(len(p))
}

// gathered sends a chunk when one is full and reports a write of n bytes.
func (s *streamWriter) gathered(n int) (int, error) {
	if s.err == nil && len(s.buf) >= streamChunk {
		s.flush()
	}
	if s.err != nil {
		return 0, s.err
	}
	return n, nil
}

func (s *streamWriter) flush() {
	if !s.started {
		h := s.w.Header()
		for k, v := range s.header {
			h[k] = v
		}
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	if len(s.buf) > 0 {
		_, s.err = s.w.Write(s.buf)
		s.buf = s.buf[:0]
	}
}

// close sends what is left. Its error is the client's: by then the status
// is out and no error body can follow.
func (s *streamWriter) close() error {
	if s.err == nil {
		s.flush()
	}
	return s.err
}

// clientGone reports whether the stream stopped because writing to the
// client failed, rather than because of the data source.
func (s *streamWriter) clientGone() bool { return s.err != nil }

// fail ends a stream that could not be completed. Before anything was sent
// it returns err, for the adapter to answer with an error body. Afterwards
// the 200 is out, so it cuts the connection instead: a truncated body must
// not look complete (a CSV cut at a line boundary would), and it returns
// nil since no error body can follow.
func (s *streamWriter) fail(err error) error {
	if !s.started {
		return err
	}
	if conn, _, herr := http.NewResponseController(s.w).Hijack(); herr == nil {
		_ = conn.Close()
	}
	// Over HTTP/2 nothing can be hijacked: the body then simply ends early,
	// which still leaves a JSON body invalid.
	return nil
}
