package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
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

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// handOverOf opens a hand-over to c for org, closed at the end of the test.
func handOverOf(t *testing.T, c *Client, org string) *handOver {
	t.Helper()
	s, err := c.openHandOver(context.Background(), org)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// arrival names an input as imports.Run does.
func arrival(name string) ingest.Arrival {
	return ingest.Arrival{Source: ingest.SourceImport, Name: name}
}

// TestHandOver ensures inputs handed over get the answers an offline
// import gives them: files go as descriptors, read from their start
// whatever their offset, and share commits; an input sent again is a
// duplicate; one without a report is quarantined; inputs that are no
// regular file (a pipe, bytes of an mbox message) go as bytes, many to a
// message and sharing commits too, and one larger than a message takes
// through a pipe; a reader that fails is the input's failure, not the
// server's. No descriptor is left open in the server.
func TestHandOver(t *testing.T) {
	db, local, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	ctx := context.Background()
	paths := writeReportFiles(t, 150, 3)
	fdsBefore := openFDs(t)
	s := handOverOf(t, c, org.ID)
	concurrently := func(n int, each func(i int) error) {
		t.Helper()
		before := local.Pipeline.Stats().Commits
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = each(i) }()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if commits := local.Pipeline.Stats().Commits - before; commits >= uint64(n/2) {
			t.Errorf("%d commits for %d inputs: a hand-over's inputs should share commits", commits, n)
		}
	}
	stored := func(res *ingest.Result, err error, records int) error {
		switch {
		case err != nil:
			return err
		case len(res.Reports) != 1 || res.Reports[0].Duplicate || res.Reports[0].Records != records:
			return fmt.Errorf("result %+v", res)
		}
		return nil
	}
	concurrently(len(paths), func(i int) error {
		f, err := os.Open(paths[i])
		if err != nil {
			return err
		}
		defer f.Close()
		if i%10 == 0 {
			// The importer reads a file's first bytes before: the
			// server must read from the start all the same.
			_, _ = f.Seek(0, io.SeekEnd)
		}
		res, err := s.ingest(ctx, f, arrival(paths[i]))
		return stored(res, err, 3)
	})
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	concurrently(100, func(i int) error {
		xml := reportgen.Generate(int64(1000+i), 2, reportgen.Options{Begin: begin})
		res, err := s.ingest(ctx, bytes.NewReader(xml), arrival(fmt.Sprintf("inbox.mbox#%d", i+1)))
		return stored(res, err, 2)
	})

	f, err := os.Open(paths[7])
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.ingest(ctx, f, arrival(paths[7]))
	f.Close()
	if err != nil || len(again.Reports) != 1 || !again.Reports[0].Duplicate {
		t.Errorf("same file again: %+v, %v; want a duplicate", again, err)
	}
	junkPath := writeFile(t, t.TempDir(), "junk.txt", []byte("not a report"))
	junk, _ := os.Open(junkPath)
	res, err := s.ingest(ctx, junk, arrival(junkPath))
	junk.Close()
	if err != nil || res.Quarantined == "" {
		t.Errorf("junk: %+v, %v; want quarantined", res, err)
	}
	if e, _ := local.FindQuarantine(ctx, res.Quarantined); e == nil || e.Name != junkPath {
		t.Errorf("quarantine entry %+v, want it named %s", e, junkPath)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = pw.Write(reportgen.Generate(9999, 2, reportgen.Options{Begin: begin}))
		pw.Close()
	}()
	res, err = s.ingest(ctx, pr, arrival("pipe.xml"))
	pr.Close()
	if err := stored(res, err, 2); err != nil {
		t.Errorf("pipe: %v", err)
	}
	big := reportgen.Generate(5000, 9000, reportgen.Options{Begin: begin})
	if len(big) <= maxInline {
		t.Fatalf("large input of %d bytes fits a message; make it larger", len(big))
	}
	res, err = s.ingest(ctx, bytes.NewReader(big), arrival("big.xml"))
	if err := stored(res, err, 9000); err != nil {
		t.Errorf("large input: %v", err)
	}
	_, err = s.ingest(ctx, io.MultiReader(strings.NewReader("<feedback>"), failingReader{}), arrival("broken.xml"))
	if err == nil || errors.Is(err, ErrServerGone) || !strings.Contains(err.Error(), "reading the input") {
		t.Errorf("failing reader: %v", err)
	}
	s.Close(ctx)
	waitFDs(t, fdsBefore)
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// TestHandOverImportsAsOffline ensures Import handing the files over gives
// what Import reading them on the server gives (ImportTree: files,
// folders, an mbox, a missing path), and logs one line of counts instead
// of the pipeline's line per input, which goes to debug, except for an
// input quarantined, which stays at info.
func TestHandOverImportsAsOffline(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	env := ingesttest.NewWith(t, func(c *ingest.Config) { c.Logger = log })
	db := env.DB
	c := serveHandler(t, Handler(&Local{DB: db, Pipeline: env.Pipeline}, log))
	org := mustAcmeExample(t, db)
	offDB, offLocal, _ := serveIntake(t)
	offOrg := mustAcmeExample(t, offDB)
	dir := writeImportTree(t)
	paths := []string{dir, filepath.Join(dir, "nope.xml")}
	var got, want []string
	sum, err := c.Import(context.Background(), ImportRequest{Paths: paths, Org: org.ID, HandOver: true,
		Progress: func(it imports.Item, _ *imports.Summary) { got = append(got, itemText(it)) }})
	if err != nil {
		t.Fatal(err)
	}
	wantSum, err := offLocal.Import(context.Background(), ImportRequest{Paths: paths, Org: offOrg.ID,
		Progress: func(it imports.Item, _ *imports.Summary) { want = append(want, itemText(it)) }})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) < 8 {
		t.Errorf("handed over:\n%s\noffline:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sum.Imported != wantSum.Imported || sum.Records != wantSum.Records || sum.Quarantined != wantSum.Quarantined ||
		sum.Failed != 1 || wantSum.Failed != 1 || sum.Files != wantSum.Files {
		t.Errorf("summary %+v, offline %+v", sum, wantSum)
	}
	out := logs.String()
	if n := strings.Count(out, `msg="admin import"`); n != 1 || !strings.Contains(out, "mode=hand-over") {
		t.Fatalf("%d import lines, want 1 of a hand-over:\n%s", n, out)
	}
	line := fmt.Sprintf("inputs=%d reports=%d failure_reports=0 tls_reports=0 duplicates=0 records=%d quarantined=%d failed=0 stopped=false",
		sum.Inputs-1, sum.Imported, sum.Records, sum.Quarantined)
	if !strings.Contains(out, line) {
		t.Errorf("import line without %q:\n%s", line, out)
	}
	if n := strings.Count(out, "msg=ingested"); n != sum.Quarantined || !strings.Contains(out, "outcome=quarantined") {
		t.Errorf("%d per-input lines at info, want only the %d quarantined:\n%s", n, sum.Quarantined, out)
	}
}

// writeImportTree writes report files (one of them gzip'd), one that is
// no report, one for a domain nobody registered, and an mbox of two
// report mails and one other.
func writeImportTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	writeFile(t, dir, "a.xml", reportgen.Generate(1, 5, reportgen.Options{Begin: begin}))
	writeFile(t, dir, "b.xml.gz", reportgen.Gzip(reportgen.Generate(2, 4, reportgen.Options{Begin: begin})))
	writeFile(t, dir, "notes.txt", []byte("not a report\n"))
	writeFile(t, dir, "other.xml", reportgen.Generate(3, 2, reportgen.Options{Domain: "unregistered.test", Begin: begin}))
	var mbox bytes.Buffer
	for i, m := range [][]byte{reportgen.Generate(4, 3, reportgen.Options{Begin: begin}), []byte("hello"), reportgen.Generate(5, 3, reportgen.Options{Begin: begin})} {
		fmt.Fprintf(&mbox, "From a@google.com Thu Nov 20 10:00:00 2026\nSubject: %d\nContent-Type: text/xml\n\n%s\n\n", i, m)
	}
	writeFile(t, dir, "inbox.mbox", mbox.Bytes())
	return dir
}

// itemText is an item as the comparison of two imports sees it: no ids.
func itemText(it imports.Item) string {
	if it.Err != nil {
		return it.Name + ": error " + strings.TrimPrefix(it.Err.Error(), "server: ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: quarantined %v (%s)", it.Name, it.Result.Quarantined != "", it.Result.Reason)
	for _, o := range it.Result.Reports {
		fmt.Fprintf(&b, " %s %s %d %v", o.Kind, o.Domain, o.Records, o.Duplicate)
	}
	return b.String()
}

// TestHandOverStreamsAnswers ensures an input is answered as soon as it is
// stored, not when an input sent before it is: with one input held back
// (a pipe whose writer has not finished), those after it are answered.
func TestHandOverStreamsAnswers(t *testing.T) {
	db, _, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	s := handOverOf(t, c, org.ID)
	ctx := context.Background()
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	slow := &handed{name: "slow.xml", f: pr, taken: make(chan struct{}), reply: make(chan outcome, 1)}
	slowDone := make(chan error, 1)
	go func() {
		_, err := s.hand(ctx, slow)
		slowDone <- err
	}()
	got := make(chan error, 5)
	time.Sleep(10 * time.Millisecond) // the slow input goes first
	for i := range 5 {
		go func() {
			res, err := s.ingest(ctx, bytes.NewReader(reportgen.Generate(int64(i), 2, reportgen.Options{Begin: begin})), arrival(fmt.Sprintf("r%d.xml", i)))
			if err == nil && (len(res.Reports) != 1 || res.Reports[0].Records != 2) {
				err = fmt.Errorf("result %+v", res)
			}
			got <- err
		}()
	}
	for range 5 {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-slowDone:
			t.Fatalf("the held input was answered before it was written: %v", err)
		case <-time.After(30 * time.Second): // a hang, not a speed limit
			t.Fatal("the stored inputs were not answered while one input sent before them is held")
		}
	}
	if _, err := pw.Write(reportgen.Generate(100, 2, reportgen.Options{Begin: begin})); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-slowDone; err != nil {
		t.Errorf("the held input: %v", err)
	}
	pr.Close()
}

// TestHandOverBadMessages sends broken messages: the server ends the
// hand-over, ingests the inputs it was given with their names, answers
// for them, refuses a descriptor that is no regular file or pipe, and
// closes every descriptor it got.
func TestHandOverBadMessages(t *testing.T) {
	db, _, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	paths := writeReportFiles(t, 2, 2)
	// message is the message of ins, whose descriptors the test attaches.
	message := func(ins ...*handed) []byte {
		msg, _ := appendHandOver(nil, ins)
		return msg
	}
	good := message(&handed{name: "good.xml", f: os.Stdin})
	var tooLong []byte
	tooLong = binary.AppendUvarint(tooLong, 1)
	tooLong = binary.AppendUvarint(tooLong, 1)
	tooLong = append(tooLong, 'a')
	tooLong = binary.AppendUvarint(tooLong, maxInline+2)
	for _, tc := range []struct {
		name    string
		msg     []byte
		files   int // attached to msg
		answers int
		want    string // in the answer
	}{
		{"more names than files", message(&handed{name: "a.xml", f: os.Stdin}, &handed{name: "b.xml", f: os.Stdin}), 1, 0, ""},
		{"too many inputs", []byte{65}, 0, 0, ""},
		{"name too long", []byte{1, 0xff, 0xff, 0x03}, 1, 0, ""},
		{"input too large", tooLong, 0, 0, ""},
		{"files without a message", nil, 2, 0, ""},
		{"one good file, then the end", append(good, 0), 1, 1, `"records":2`},
		{"bytes, a file, then cut", append(message(&handed{name: "x.xml", data: []byte("junk")}, &handed{name: "y.xml", f: os.Stdin}), 1, 9, 'a'), 1, 2, `"result"`},
		{"a folder", append(message(&handed{name: "dir", f: os.Stdin}), 0), -1, 1, "not a regular file or a pipe"},
		{"cut short", []byte{1, 9, 'a'}, 1, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fdsBefore := openFDs(t)
			uc, br, err := c.openImport(context.Background(), importHeader{Org: org.ID, HandOver: true})
			if err != nil {
				t.Fatal(err)
			}
			var files []*os.File
			for i := range tc.files {
				f, err := os.Open(paths[i%len(paths)])
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			if tc.files < 0 {
				f, err := os.Open(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			var fds []int
			for _, f := range files {
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
				if !strings.Contains(sc.Text(), tc.want) {
					t.Errorf("answer %s, want %q", sc.Text(), tc.want)
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
// closes a hand-over's files as its ingests end.
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

// fakeHandOverServer answers a hand-over's inputs with answer(i), in the
// order they come, and closes the connection after the input numbered
// last (counted from 0).
func fakeHandOverServer(t *testing.T, answer func(i int) string, last int) *Client {
	t.Helper()
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	h.HandleFunc("POST /v1/import", func(w http.ResponseWriter, r *http.Request) {
		conn := switchFake(t, w, r)
		if conn == nil {
			return
		}
		defer conn.Close() // the server dies
		n := 0
		_ = readHandOver(conn.(*net.UnixConn), func(in received) {
			if in.f != nil {
				in.f.Close()
			}
			if a := answer(n); a != "" {
				fmt.Fprintln(conn, a)
			}
			if n++; n == last+1 {
				conn.Close()
			}
		})
	})
	return serveHandler(t, h)
}

// TestHandOverServerGone ensures inputs of a hand-over the server stopped
// answering fail with ErrServerGone, those answered before keep their
// answers, and later inputs fail at once instead of waiting; and that
// Import stops with a StoppedError saying how far it got.
func TestHandOverServerGone(t *testing.T) {
	const answered = 3
	answer := func(i int) string {
		if i < answered {
			return fmt.Sprintf(`{"i":%d,"result":{"reports":[]}}`, i)
		}
		return ""
	}
	c := fakeHandOverServer(t, answer, answered+1)
	s := handOverOf(t, c, "")
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
			_, results[i] = s.ingest(context.Background(), f, arrival(p))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, results[i] = s.ingest(ctx, f, arrival(p))
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

	c = fakeHandOverServer(t, answer, answered)
	sum, err := c.Import(context.Background(), ImportRequest{Paths: []string{filepath.Dir(paths[0])}, Jobs: 1, HandOver: true})
	var stopped *imports.StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, ErrServerGone) || sum == nil || sum.Inputs != answered || sum.Files != len(paths) {
		t.Errorf("Import with the server gone: %+v, %v; want a StoppedError after %d inputs", sum, err, answered)
	}
}

// TestHandOverBadAnswers ensures an answer for an input never sent (or
// sent and answered already), or one that is not JSON, breaks the
// hand-over: the inputs waiting fail with the reason instead of hanging.
func TestHandOverBadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
	}{
		{"unknown input", `{"i":7,"result":{}}`, "bad answer for input 7"},
		{"not JSON", `<html>`, "reading the answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeHandOverServer(t, func(int) string { return tc.answer }, 5)
			s := handOverOf(t, c, "")
			_, err := s.ingest(context.Background(), strings.NewReader("x"), arrival("x.xml"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error with %q", err, tc.want)
			}
			if _, err := s.ingest(context.Background(), strings.NewReader("y"), arrival("y.xml")); err == nil {
				t.Error("an input after the break was accepted")
			}
		})
	}
	c := fakeHandOverServer(t, func(i int) string {
		return fmt.Sprintf(`{"i":%d,"error":{"kind":"invalid","message":"bad %d"}}`, i, i)
	}, 5)
	s := handOverOf(t, c, "")
	if _, err := s.ingest(context.Background(), strings.NewReader("x"), arrival("x.xml")); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "bad 0") {
		t.Errorf("an error answer: %v, want ErrInvalid", err)
	}
}

// TestReadAllSizeHint reads inputs whose size hint is right, too small
// (a file that grew since its Stat), too large and absent: every byte is
// read whatever the hint.
func TestReadAllSizeHint(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	for _, hint := range []int{0, 1, 9999, 10000, 10001, 50000} {
		// iotest.OneByteReader-like short reads: the loop must keep going.
		got, err := readAll(io.LimitReader(&shortReader{b: data}, int64(len(data))), hint)
		if err != nil {
			t.Fatalf("hint %d: %v", hint, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("hint %d: read %d bytes, want %d", hint, len(got), len(data))
		}
	}
	f, err := os.CreateTemp(t.TempDir(), "input")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if got := sizeHint(f); got != len(data) {
		t.Fatalf("sizeHint of a file: %d, want %d", got, len(data))
	}
	if got := sizeHint(bytes.NewReader(data[:7])); got != 7 {
		t.Fatalf("sizeHint of a bytes.Reader: %d, want 7", got)
	}
	if got := sizeHint(io.MultiReader(bytes.NewReader(data))); got != 0 {
		t.Fatalf("sizeHint of an unknown reader: %d, want 0", got)
	}
}

// shortReader returns at most 3,000 bytes a call.
type shortReader struct{ b []byte }

func (r *shortReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 3000)], r.b)
	r.b = r.b[n:]
	return n, nil
}
