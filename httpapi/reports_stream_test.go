package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestStreamFailure ensures a stream that breaks before its first chunk
// still becomes an error response, and one that breaks later cuts the
// connection, so that a client never takes a truncated body for a whole one.
func TestStreamFailure(t *testing.T) {
	e := newEnv(t, 1000)
	broken := errors.New("disk on fire")
	streamThenFail := func(n int) handlerFunc {
		return func(w http.ResponseWriter, r *request) error {
			out := newStream(w, http.Header{"Content-Type": {"text/csv; charset=utf-8"}})
			line := strings.Repeat("x", 99) + "\n"
			for i := 0; i < n; i++ {
				if _, err := out.WriteString(line); err != nil {
					return e.api.failStream(r, out, err)
				}
			}
			return e.api.failStream(r, out, broken)
		}
	}
	e.api.handle("GET", "/test/stream-early", public, streamThenFail(10))
	e.api.handle("GET", "/test/stream-late", public, streamThenFail(10*streamChunk/100))
	e.api.handle("GET", "/test/stream-whole", public, func(w http.ResponseWriter, r *request) error {
		out := newStream(w, http.Header{"Content-Type": {"text/plain"}})
		for i := 0; i < 3*streamChunk/100; i++ {
			out.WriteString(strings.Repeat("y", 99) + "\n")
		}
		return out.close()
	})

	early := e.do("GET", "/test/stream-early", "", nil)
	if early.status != http.StatusInternalServerError || early.errorCode(t) != "internal" {
		t.Errorf("failure before the first chunk: %d %.80s", early.status, early.body)
	}
	if strings.Contains(string(early.body), "xxx") || early.header.Get("Content-Type") != "application/json" {
		t.Errorf("the error body carries streamed data or the stream's type: %q", early.header.Get("Content-Type"))
	}

	res, err := e.srv.Client().Get(e.srv.URL + "/test/stream-late")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("failure after the first chunk: status %d, read error %v after %d bytes; want a cut connection",
			res.StatusCode, err, len(body))
	}

	whole := e.do("GET", "/test/stream-whole", "", nil)
	if whole.status != http.StatusOK || len(whole.body) != 3*streamChunk/100*100 ||
		!bytes.HasSuffix(whole.body, []byte("y\n")) || whole.header.Get("Content-Type") != "text/plain" {
		t.Errorf("a whole stream: %d, %d bytes, type %q", whole.status, len(whole.body), whole.header.Get("Content-Type"))
	}
}
