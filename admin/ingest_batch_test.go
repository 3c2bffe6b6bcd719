package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestBatcher ensures inputs sent through a Batcher get the answers a
// request per input gets: small reports stored (in fewer commits than
// inputs), a report already stored a duplicate, an input without a report
// quarantined, an unknown organization its error kind, an input larger
// than a batch takes stored through the streamed route.
func TestBatcher(t *testing.T) {
	db, local, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	ctx := context.Background()
	b := c.NewBatcher(org.ID)
	defer b.Close()
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	const n = 200
	before := local.Pipeline.Stats().Commits
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			xml := reportgen.Generate(int64(i), 3, reportgen.Options{Begin: begin})
			res, err := b.Ingest(ctx, bytes.NewReader(xml), fmt.Sprintf("r%d.xml", i))
			switch {
			case err != nil:
				errs[i] = err
			case len(res.Reports) != 1 || res.Reports[0].Duplicate || res.Reports[0].Records != 3:
				errs[i] = fmt.Errorf("result %+v", res)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if commits := local.Pipeline.Stats().Commits - before; commits >= n/2 {
		t.Errorf("%d commits for %d small inputs: batches should share commits", commits, n)
	}

	again, err := b.Ingest(ctx, bytes.NewReader(reportgen.Generate(7, 3, reportgen.Options{Begin: begin})), "again.xml")
	if err != nil || len(again.Reports) != 1 || !again.Reports[0].Duplicate {
		t.Errorf("same report again: %+v, %v; want a duplicate", again, err)
	}
	junk, err := b.Ingest(ctx, strings.NewReader("not a report"), "junk.txt")
	if err != nil || junk.Quarantined == "" {
		t.Errorf("junk: %+v, %v; want quarantined", junk, err)
	}
	big := reportgen.Generate(1000, 9000, reportgen.Options{Begin: begin})
	if len(big) <= MaxBatchInput {
		t.Fatalf("large input of %d bytes fits a batch; make it larger", len(big))
	}
	res, err := b.Ingest(ctx, bytes.NewReader(big), "big.xml")
	if err != nil || len(res.Reports) != 1 || res.Reports[0].Records != 9000 {
		t.Errorf("large input: %+v, %v", res, err)
	}
	// A reader that fails is the input's failure, not the server's.
	_, err = b.Ingest(ctx, io.MultiReader(strings.NewReader("<feedback>"), failingReader{}), "broken.xml")
	if err == nil || errors.Is(err, ErrServerGone) || !strings.Contains(err.Error(), "reading the input") {
		t.Errorf("failing reader: %v", err)
	}

	other := c.NewBatcher("no-such-org")
	defer other.Close()
	if _, err := other.Ingest(ctx, strings.NewReader("x"), "x.xml"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown organization: %v, want ErrNotFound", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

// TestBatchBadBodies ensures a malformed batch body is refused as invalid
// with a message naming the problem, and that inputs read before the
// problem are still answered for (stored, not lost).
func TestBatchBadBodies(t *testing.T) {
	db, _, c := serveIntake(t)
	mustAcmeExample(t, db)
	good := appendFrame(nil, "good.xml", reportgen.Generate(1, 2, reportgen.Options{Begin: time.Now().Add(-48 * time.Hour)}))
	var many []byte
	for i := 0; i <= MaxBatchInputs; i++ {
		many = appendFrame(many, "e", nil)
	}
	for _, tc := range []struct {
		name, want string
		body       []byte
	}{
		{"cut in the name", "unexpected EOF", []byte{5, 'a', 'b'}},
		{"cut in the bytes", "unexpected EOF", append(good[:len(good):len(good)], appendFrame(nil, "x", []byte("abcdef"))[:6]...)},
		{"no length after name", "unexpected EOF", []byte{1, 'a'}},
		{"name too long", "input name of", []byte{0xff, 0xff, 0x03}},
		{"input too large", "at most 1048576 in a batch", append([]byte{1, 'a'}, 0x81, 0x80, 0x80, 0x01)},
		{"too many inputs", "more than 512 inputs", many},
		{"bad varint", "frame", bytes.Repeat([]byte{0xff}, 11)},
	} {
		req, _ := http.NewRequest("POST", "http://dmarcd/v1/ingest/batch", bytes.NewReader(tc.body))
		_, err := c.roundTrip(req)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
	// The good input before the cut was stored: sending it again finds it.
	rep, err := c.IngestBatch(context.Background(), "", []BatchInput{{Name: "good.xml", Data: reportgen.Generate(1, 2, reportgen.Options{Begin: time.Now().Add(-48 * time.Hour)})}})
	if err != nil || rep[0].Err != nil || len(rep[0].Result.Reports) != 1 || !rep[0].Result.Reports[0].Duplicate {
		t.Errorf("input before the bad frame: %+v %v; want stored (a duplicate now)", rep, err)
	}
	if _, err := c.IngestBatch(context.Background(), "", []BatchInput{{Name: "x", Data: make([]byte, MaxBatchInput+1)}}); err == nil {
		t.Error("client sent an input larger than a batch takes")
	}
}

// TestBatcherOldServer ensures a Batcher talking to a server without the
// batch route falls back to a request per input.
func TestBatcherOldServer(t *testing.T) {
	db, local, _ := serveIntake(t)
	mustAcmeExample(t, db)
	inner := Handler(local, slog.New(slog.DiscardHandler))
	old := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ingest/batch" {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})
	c := serveHandler(t, old)
	b := c.NewBatcher("")
	defer b.Close()
	for i := range 3 {
		res, err := b.Ingest(context.Background(), bytes.NewReader(reportgen.Generate(int64(i), 2, reportgen.Options{Begin: time.Now().Add(-48 * time.Hour)})), "r.xml")
		if err != nil || len(res.Reports) != 1 || res.Reports[0].Duplicate {
			t.Errorf("input %d through an old server: %+v, %v", i, res, err)
		}
	}
}

// serveHandler serves h on a real socket and dials it.
func serveHandler(t *testing.T, h http.Handler) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dmarcd.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// lockedBuffer is a log destination safe for concurrent handlers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBatchLogsOneLine ensures a batch writes one info line with its
// counts instead of the pipeline's line per input, which goes to debug,
// except for an input quarantined, which stays at info.
func TestBatchLogsOneLine(t *testing.T) {
	db := storetest.Open(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := ingest.New(ingest.Config{Store: db, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c := serveHandler(t, Handler(&Local{DB: db, Pipeline: p}, log))
	org := mustAcmeExample(t, db)
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	var in []BatchInput
	for i := range 5 {
		in = append(in, BatchInput{Name: fmt.Sprintf("r%d.xml", i), Data: reportgen.Generate(int64(i), 3, reportgen.Options{Begin: begin})})
	}
	in = append(in, BatchInput{Name: "junk.txt", Data: []byte("not a report")})
	outs, err := c.IngestBatch(context.Background(), org.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs[:5] {
		if o.Err != nil || len(o.Result.Reports) != 1 {
			t.Fatalf("input %d: %+v", i, o)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "msg=\"admin batch ingested\""); n != 1 {
		t.Errorf("%d batch lines, want 1:\n%s", n, got)
	}
	if !strings.Contains(got, "inputs=6 reports=5 duplicates=0 records=15 quarantined=1 failed=0") {
		t.Errorf("batch line without its counts:\n%s", got)
	}
	if n := strings.Count(got, "msg=ingested"); n != 1 || !strings.Contains(got, "outcome=quarantined") {
		t.Errorf("%d per-input lines at info, want only the quarantined one:\n%s", n, got)
	}
}

// heldService holds back the ingest of the input named held until release
// is closed.
type heldService struct {
	Service
	held    string
	release chan struct{}
}

func (s *heldService) Ingest(ctx context.Context, r io.Reader, name, org string) (*ingest.Result, error) {
	if name == s.held {
		<-s.release
	}
	return s.Service.Ingest(ctx, r, name, org)
}

// TestBatchStreamsAnswers ensures a Batcher's caller is answered as soon
// as its input is stored, not when the slowest input of its batch is: with
// one input of a batch held back, the others' Ingest calls return.
func TestBatchStreamsAnswers(t *testing.T) {
	db, local, _ := serveIntake(t)
	org := mustAcmeExample(t, db)
	svc := &heldService{Service: local, held: "slow.xml", release: make(chan struct{})}
	c := serveHandler(t, Handler(svc, slog.New(slog.DiscardHandler)))
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	var in []BatchInput
	in = append(in, BatchInput{Name: "slow.xml", Data: reportgen.Generate(100, 2, reportgen.Options{Begin: begin})})
	for i := range 5 {
		in = append(in, BatchInput{Name: fmt.Sprintf("r%d.xml", i), Data: reportgen.Generate(int64(i), 2, reportgen.Options{Begin: begin})})
	}
	got := make(chan int, len(in))
	var outs [6]BatchOutcome
	errc := make(chan error, 1)
	go func() {
		errc <- c.ingestBatch(context.Background(), org.ID, in, func(i int, o BatchOutcome) { outs[i] = o; got <- i })
	}()
	for range len(in) - 1 {
		select {
		case i := <-got:
			if i == 0 {
				t.Fatal("the held input was answered before it was released")
			}
		case err := <-errc:
			t.Fatalf("batch ended while an input is held: %v", err)
		case <-time.After(30 * time.Second): // a hang, not a speed limit
			t.Fatal("the stored inputs were not answered while one input of the batch is held")
		}
	}
	close(svc.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if i := <-got; i != 0 {
		t.Fatalf("last answer for input %d, want 0", i)
	}
	for i, o := range outs {
		if o.Err != nil || len(o.Result.Reports) != 1 || o.Result.Reports[0].Records != 2 {
			t.Errorf("input %d: %+v", i, o)
		}
	}
}

// TestBatchOldPeers ensures the streamed answer is only for clients that
// ask for it: a request without the Accept header (an older client) gets
// every answer at once, in input order; and a client talking to a server
// that does not stream (the header dropped on the way) reads that answer.
func TestBatchOldPeers(t *testing.T) {
	db, local, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	var body []byte
	for i := range 3 {
		body = appendFrame(body, fmt.Sprintf("r%d.xml", i), reportgen.Generate(int64(i), i+1, reportgen.Options{Begin: begin}))
	}
	body = appendFrame(body, "junk.txt", []byte("junk"))
	req, _ := http.NewRequest("POST", "http://dmarcd/v1/ingest/batch?org="+org.ID, bytes.NewReader(body))
	resp, err := c.roundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("old client's answer is %q, want application/json", ct)
	}
	var ans batchAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil || len(ans.Results) != 4 {
		t.Fatalf("old client's answer: %+v, %v", ans, err)
	}
	for i, it := range ans.Results[:3] {
		if it.Result == nil || len(it.Result.Reports) != 1 || it.Result.Reports[0].Records != i+1 {
			t.Errorf("old client's answer %d: %+v", i, it)
		}
	}
	if it := ans.Results[3]; it.Result == nil || it.Result.Quarantined == "" {
		t.Errorf("old client's answer 3: %+v, want quarantined", it)
	}

	inner := Handler(local, slog.New(slog.DiscardHandler))
	old := serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Accept")
		inner.ServeHTTP(w, r)
	}))
	outs, err := old.IngestBatch(context.Background(), org.ID, []BatchInput{
		{Name: "a.xml", Data: reportgen.Generate(50, 4, reportgen.Options{Begin: begin})},
		{Name: "b.xml", Data: reportgen.Generate(1, 2, reportgen.Options{Begin: begin})},
	})
	if err != nil || len(outs) != 2 {
		t.Fatalf("non-streaming server: %+v, %v", outs, err)
	}
	if o := outs[0]; o.Err != nil || o.Result.Reports[0].Records != 4 || o.Result.Reports[0].Duplicate {
		t.Errorf("non-streaming server, input 0: %+v", o)
	}
	if o := outs[1]; o.Err != nil || !o.Result.Reports[0].Duplicate {
		t.Errorf("non-streaming server, input 1: %+v, want a duplicate", o)
	}
}

// TestReadBatchStreamBad ensures a streamed answer that answers an input
// twice, names one out of range, is not JSON or stops early is an error,
// with the inputs answered before it delivered and the rest not.
func TestReadBatchStreamBad(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		answered         int
	}{
		{"twice", `{"i":0,"result":{}}` + "\n" + `{"i":0,"result":{}}`, "bad answer for input 0", 1},
		{"out of range", `{"i":3,"result":{}}`, "bad answer for input 3", 0},
		{"negative", `{"i":-1,"result":{}}`, "bad answer for input -1", 0},
		{"cut short", `{"i":1,"error":{"kind":"invalid","message":"x"}}` + "\n" + `{"i":0,"res`, "2 of 3 inputs unanswered", 1},
		{"empty", ``, "3 of 3 inputs unanswered", 0},
		{"not json", `<html>`, "reading the answer", 0},
	} {
		n := 0
		err := readBatchStream(strings.NewReader(tc.body), 3, func(int, BatchOutcome) { n++ })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		if n != tc.answered {
			t.Errorf("%s: %d inputs answered, want %d", tc.name, n, tc.answered)
		}
	}
	var got []BatchOutcome
	err := readBatchStream(strings.NewReader(`{"i":1,"error":{"kind":"invalid","message":"x"}}`+"\n"+`{"i":0}`), 2,
		func(_ int, o BatchOutcome) { got = append(got, o) })
	if err != nil || !errors.Is(got[0].Err, store.ErrInvalid) || got[1].Err == nil {
		t.Errorf("an error and an empty answer: %+v, %v", got, err)
	}
}

// mustAcmeExample creates the organization acme with the domain
// example.com, reporting address abc@reports.test.
func mustAcmeExample(t *testing.T, db *store.DB) *store.Organization {
	t.Helper()
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateDomain(&store.Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "abc@reports.test", DMARCRecord: "v=DMARC1; p=none"}); err != nil {
		t.Fatal(err)
	}
	return org
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
