package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// writeReportFiles writes n report files of records records each, cycling
// xml, gz and zip, and returns their paths.
func writeReportFiles(t *testing.T, n, records int) []string {
	t.Helper()
	dir := t.TempDir()
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	var paths []string
	for i := range n {
		xml := reportgen.Generate(int64(i), records, reportgen.Options{Begin: begin})
		name, data := fmt.Sprintf("r%d.xml", i), xml
		switch i % 3 {
		case 1:
			name, data = name+".gz", reportgen.Gzip(xml)
		case 2:
			name, data = fmt.Sprintf("r%d.zip", i), reportgen.Zip(name, xml)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestFileStream ensures files handed to a Batcher go to the server as
// open files and come back with the answers bytes would get: every
// report stored (in fewer commits than files), whatever the file's offset;
// a file sent again a duplicate; a file without a report quarantined; an
// unknown organization its error kind; something that is no regular file
// (a pipe) sent as bytes. No descriptor is left open in the server.
func TestFileStream(t *testing.T) {
	db, local, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	ctx := context.Background()
	paths := writeReportFiles(t, 150, 3)
	fdsBefore := openFDs(t)
	b := c.NewBatcher(org.ID)
	before := local.Pipeline.Stats().Commits
	var wg sync.WaitGroup
	errs := make([]error, len(paths))
	for i, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.Open(p)
			if err != nil {
				errs[i] = err
				return
			}
			defer f.Close()
			if i%10 == 0 {
				// The importer reads a file's first bytes before: the
				// server must read from the start all the same.
				_, _ = f.Seek(0, io.SeekEnd)
			}
			res, err := b.Ingest(ctx, f, p)
			switch {
			case err != nil:
				errs[i] = err
			case len(res.Reports) != 1 || res.Reports[0].Duplicate || res.Reports[0].Records != 3:
				errs[i] = fmt.Errorf("%s: result %+v", p, res)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if b.files == nil {
		t.Fatal("the files went as bytes, not through a file stream")
	}
	if commits := local.Pipeline.Stats().Commits - before; commits >= uint64(len(paths)/2) {
		t.Errorf("%d commits for %d files: a stream's files should share commits", commits, len(paths))
	}

	f, err := os.Open(paths[7])
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Ingest(ctx, f, paths[7])
	f.Close()
	if err != nil || len(again.Reports) != 1 || !again.Reports[0].Duplicate {
		t.Errorf("same file again: %+v, %v; want a duplicate", again, err)
	}
	junkPath := filepath.Join(t.TempDir(), "junk.txt")
	if err := os.WriteFile(junkPath, []byte("not a report"), 0o644); err != nil {
		t.Fatal(err)
	}
	junk, _ := os.Open(junkPath)
	res, err := b.Ingest(ctx, junk, junkPath)
	junk.Close()
	if err != nil || res.Quarantined == "" {
		t.Errorf("junk: %+v, %v; want quarantined", res, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = pw.Write(reportgen.Generate(9999, 2, reportgen.Options{Begin: time.Now().Add(-48 * time.Hour)}))
		pw.Close()
	}()
	res, err = b.Ingest(ctx, pr, "pipe.xml")
	pr.Close()
	if err != nil || len(res.Reports) != 1 || res.Reports[0].Records != 2 {
		t.Errorf("pipe: %+v, %v; want stored as bytes", res, err)
	}
	b.Close()

	other := c.NewBatcher("no-such-org")
	f, _ = os.Open(paths[0])
	_, err = other.Ingest(ctx, f, paths[0])
	f.Close()
	other.Close()
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown organization: %v, want ErrNotFound", err)
	}
	waitFDs(t, fdsBefore)
}

// TestFileStreamOldServer ensures a Batcher talking to a server without
// file streams sends files as bytes.
func TestFileStreamOldServer(t *testing.T) {
	db, local, _ := serveIntake(t)
	org := mustAcmeExample(t, db)
	inner := Handler(local, slog.New(slog.DiscardHandler))
	c := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ingest/files" {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	b := c.NewBatcher(org.ID)
	defer b.Close()
	for _, p := range writeReportFiles(t, 3, 2) {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Ingest(context.Background(), f, p)
		f.Close()
		if err != nil || len(res.Reports) != 1 || res.Reports[0].Records != 2 {
			t.Errorf("%s through an old server: %+v, %v", p, res, err)
		}
	}
	if b.files != nil || !b.noFiles {
		t.Error("the batcher kept trying file streams with a server that has none")
	}
}

// TestFileStreamBadMessages sends broken messages on a switched
// connection: the server ends the stream, ingests the files it was given
// with their names, answers for them, and closes every descriptor it got.
func TestFileStreamBadMessages(t *testing.T) {
	db, _, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	paths := writeReportFiles(t, 2, 2)
	for _, tc := range []struct {
		name    string
		msg     []byte
		files   int // attached to msg
		answers int
	}{
		{"more names than files", append([]byte{2}, append(nameBytes("a.xml"), nameBytes("b.xml")...)...), 1, 0},
		{"too many files", []byte{65}, 0, 0},
		{"name too long", []byte{1, 0xff, 0xff, 0x03}, 1, 0},
		{"files without a message", nil, 2, 0},
		{"one good file, then the end", append(append([]byte{1}, nameBytes("good.xml")...), 0), 1, 1},
		{"cut short", []byte{1, 9, 'a'}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fdsBefore := openFDs(t)
			uc, br := switchToFiles(t, c.path, org.ID)
			var fds []int
			var files []*os.File
			for i := range tc.files {
				f, err := os.Open(paths[i%len(paths)])
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
				fds = append(fds, int(f.Fd()))
			}
			var oob []byte
			if len(fds) > 0 {
				oob = syscall.UnixRights(fds...)
			}
			msg := tc.msg
			if len(msg) == 0 {
				msg = []byte{0xff} // files travel with a byte: an unfinished count
			}
			if _, _, err := uc.WriteMsgUnix(msg, oob, nil); err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				f.Close() // the server has its own now
			}
			_ = uc.CloseWrite()
			answers := 0
			sc := bufio.NewScanner(br)
			for sc.Scan() {
				if !strings.Contains(sc.Text(), `"result"`) {
					t.Errorf("answer %s", sc.Text())
				}
				answers++
			}
			uc.Close()
			if answers != tc.answers {
				t.Errorf("%d answers, want %d", answers, tc.answers)
			}
			waitFDs(t, fdsBefore)
		})
	}
}

func nameBytes(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// switchToFiles opens a connection to the socket at path and switches it
// to a file stream, as openFileStream does.
func switchToFiles(t *testing.T, path, org string) (*net.UnixConn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	uc := conn.(*net.UnixConn)
	fmt.Fprintf(uc, "POST /v1/ingest/files?org=%s HTTP/1.1\r\nHost: dmarcd\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", org, filesProtocol)
	br := bufio.NewReader(uc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("switching: %v %v", resp, err)
	}
	return uc, br
}

// openFDs counts the descriptors this process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// waitFDs waits for the open descriptors to come back to n: the server
// closes a stream's files as its ingests end.
func waitFDs(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open, %d before: the server leaks files", openFDs(t), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFileStreamServerGone ensures inputs of a file stream the server
// stopped answering fail with ErrServerGone, those answered before keep
// their answers, and later inputs fail at once instead of waiting.
func TestFileStreamServerGone(t *testing.T) {
	const answered = 3
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	h.HandleFunc("POST /v1/ingest/files", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close() // the server dies
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + filesProtocol + "\r\n\r\n")
		brw.Flush()
		n := 0
		_ = readFileMessages(conn.(*net.UnixConn), func(name string, f *os.File) {
			f.Close()
			if n < answered {
				fmt.Fprintf(conn, "{\"i\":%d,\"result\":{\"reports\":[]}}\n", n)
			}
			if n++; n == answered+2 {
				conn.Close()
			}
		})
	})
	c := serveHandler(t, h)
	b := c.NewBatcher("")
	defer b.Close()
	paths := writeReportFiles(t, 8, 1)
	results := make([]error, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if i < answered {
			// In order: the answered ones go first.
			_, results[i] = b.Ingest(context.Background(), f, p)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, results[i] = b.Ingest(ctx, f, p)
		}()
	}
	wg.Wait()
	for i, err := range results {
		switch {
		case i < answered && err != nil:
			t.Errorf("input %d answered before the server went: %v", i, err)
		case i >= answered && !errors.Is(err, ErrServerGone):
			t.Errorf("input %d after the server went: %v, want ErrServerGone", i, err)
		}
	}
}
