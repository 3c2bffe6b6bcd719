package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// Many inputs per request. An import of small reports through one request
// per input spends more on the requests than on the reports, and keeps
// only as many inputs in flight as it has connections; the server's group
// commit then sees few reports per transaction. POST /v1/ingest/batch
// carries many inputs in one body, which the server ingests concurrently
// (all in flight at once, so they share commits) and answers with one
// result per input, in order, once every one is durable. An input larger
// than MaxBatchInput goes alone through POST /v1/ingest, streamed.
//
// The body is a sequence of frames: uvarint length of the name, the name,
// uvarint length of the bytes, the bytes.

// Limits of a batch.
const (
	// MaxBatchInput is the largest input sent in a batch (1 MiB).
	MaxBatchInput = 1 << 20
	// MaxBatchInputs is the most inputs in one batch.
	MaxBatchInputs = 512
	// maxBatchBytes is how many input bytes a batch the client builds
	// holds at most (the server buffers a batch's inputs until they are
	// committed).
	maxBatchBytes = 8 << 20
	maxFrameName  = 4096
)

// batchItem is one input's answer in a batch: its result or its error.
type batchItem struct {
	Result *ingest.Result `json:"result,omitempty"`
	Error  *wireError     `json:"error,omitempty"`
}

type batchAnswer struct {
	Results []batchItem `json:"results"`
}

// BatchStreamType is the media type a client accepts to have a batch's
// answers streamed: one JSON line per input ({"i": index, "result" or
// "error"}), written as soon as that input is durable, in the order they
// become so. A client that does not ask for it (an older one) gets the
// whole answer at once, in input order, when every input is done.
const BatchStreamType = "application/x-dmarcd-batch-stream"

// batchLine is one streamed answer.
type batchLine struct {
	I int `json:"i"`
	batchItem
}

// ingestBatch reads every frame of the body, starting each input's ingest
// as soon as its bytes are in, and answers once all are done, or, when
// the client accepts BatchStreamType, each input as soon as it is done:
// the client's jobs then move on to their next inputs without waiting for
// the batch's slowest, which keeps the server's pipeline full.
func (h *handler) ingestBatch(w http.ResponseWriter, r *http.Request) {
	org := r.URL.Query().Get("org")
	// One info line for the batch, not one per input (ingest logs those
	// at debug): a batch of 512 small reports wrote 512 lines.
	ctx := ingest.WithBatchLog(r.Context())
	start := time.Now()
	br := bufio.NewReaderSize(r.Body, 64<<10)
	var items []*batchItem // each written by its own goroutine
	var wg sync.WaitGroup
	var bad error
	// done receives each input's index once its item is written.
	done := make(chan int, MaxBatchInputs)
	for {
		name, data, err := readFrame(br)
		if err == io.EOF {
			break
		}
		if err == nil && len(items) == MaxBatchInputs {
			err = fmt.Errorf("more than %d inputs", MaxBatchInputs)
		}
		if err != nil {
			bad = err
			break
		}
		it := &batchItem{}
		i := len(items)
		items = append(items, it)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.svc.Ingest(ctx, bytes.NewReader(data), name, org)
			h.setOutcome(it, name, res, err)
			done <- i
		}()
	}
	if bad == nil && r.Header.Get("Accept") == BatchStreamType {
		// The batch's line is written before its last answer goes out
		// (every item is in by then), so it precedes the client's end.
		h.streamBatch(w, items, done, func() { h.logBatch(items, time.Since(start)) })
		wg.Wait()
		return
	}
	// The inputs already started are answered for, whatever follows.
	wg.Wait()
	h.logBatch(items, time.Since(start))
	if bad != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: batch: " + bad.Error()})
		return
	}
	ans := batchAnswer{Results: make([]batchItem, len(items))}
	for i, it := range items {
		ans.Results[i] = *it
	}
	reply(w, ans)
}

// setOutcome fills in an input's answer; an error that is not the input's
// (not a store.Error) is logged.
func (h *handler) setOutcome(it *batchItem, name string, res *ingest.Result, err error) {
	it.Result = res
	if err == nil {
		return
	}
	we, _ := wireErrorOf(err)
	it.Result, it.Error = nil, &we
	var se *store.Error
	if !errors.As(err, &se) {
		h.log.Error("admin input failed", "name", name, "error", err)
	}
}

// streamBatch writes each input's answer line as its index arrives on
// done, flushing when no other answer is ready (one write for the answers
// that came together). It calls last once every item is in, before the
// last write.
func (h *handler) streamBatch(w http.ResponseWriter, items []*batchItem, done <-chan int, last func()) {
	w.Header().Set("Content-Type", BatchStreamType)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	enc := json.NewEncoder(bw)
	fl, _ := w.(http.Flusher)
	if len(items) == 0 {
		last()
	}
	for n := 0; n < len(items); {
		i := <-done
		for {
			// The client going away ends nothing: the inputs are stored
			// all the same; the writes just fail.
			_ = enc.Encode(batchLine{I: i, batchItem: *items[i]})
			n++
			if n == len(items) || len(done) == 0 {
				break
			}
			i = <-done
		}
		if n == len(items) {
			last()
		}
		_ = bw.Flush()
		if fl != nil {
			fl.Flush()
		}
	}
}

// logBatch writes the batch's info line: counts only, no names.
func (h *handler) logBatch(items []*batchItem, took time.Duration) {
	var reports, dups, records, quarantined, failed int
	for _, it := range items {
		if it.Result == nil {
			failed++
			continue
		}
		if it.Result.Quarantined != "" {
			quarantined++
		}
		for _, o := range it.Result.Reports {
			reports++
			if o.Duplicate {
				dups++
			} else {
				records += o.Records
			}
		}
	}
	h.log.Info("admin batch ingested", "inputs", len(items), "reports", reports, "duplicates", dups,
		"records", records, "quarantined", quarantined, "failed", failed, "duration", took.Round(time.Millisecond))
}

// appendFrame appends one input's frame to buf.
func appendFrame(buf []byte, name string, data []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(name)))
	buf = append(buf, name...)
	buf = binary.AppendUvarint(buf, uint64(len(data)))
	return append(buf, data...)
}

// readFrame reads one frame; io.EOF at a frame boundary ends the body.
func readFrame(br *bufio.Reader) (string, []byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		if err == io.EOF {
			return "", nil, io.EOF
		}
		return "", nil, fmt.Errorf("frame: %w", err)
	}
	if n > maxFrameName {
		return "", nil, fmt.Errorf("input name of %d bytes (at most %d)", n, maxFrameName)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(br, name); err != nil {
		return "", nil, fmt.Errorf("frame name: %w", noEOF(err))
	}
	n, err = binary.ReadUvarint(br)
	if err != nil {
		return "", nil, fmt.Errorf("frame %q: %w", name, noEOF(err))
	}
	if n > MaxBatchInput {
		return "", nil, fmt.Errorf("input %q of %d bytes (at most %d in a batch)", name, n, MaxBatchInput)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(br, data); err != nil {
		return "", nil, fmt.Errorf("frame %q: %w", name, noEOF(err))
	}
	return string(name), data, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// BatchInput is one input of IngestBatch.
type BatchInput struct {
	Name string
	Data []byte // at most MaxBatchInput bytes
}

// BatchOutcome is what happened to one input of IngestBatch: its result or
// its error, as Ingest would have returned them.
type BatchOutcome struct {
	Result *ingest.Result
	Err    error
}

// errNoBatch means the server predates POST /v1/ingest/batch.
var errNoBatch = errors.New("admin socket: the server takes no batches")

// IngestBatch sends many inputs in one request and returns their outcomes
// in order, once all are stored. The error is for the request as a whole
// (the server went away: ErrServerGone); then no outcome is known.
func (c *Client) IngestBatch(ctx context.Context, orgRef string, in []BatchInput) ([]BatchOutcome, error) {
	out := make([]BatchOutcome, len(in))
	err := c.ingestBatch(ctx, orgRef, in, func(i int, o BatchOutcome) { out[i] = o })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ingestBatch sends many inputs in one request and calls each with every
// input's outcome as the server answers it (as soon as that input is
// durable, when the server streams; else all at the end, in order), once
// per input. The error is for the inputs each was not called for.
func (c *Client) ingestBatch(ctx context.Context, orgRef string, in []BatchInput, each func(int, BatchOutcome)) error {
	size := 0
	for _, it := range in {
		if len(it.Data) > MaxBatchInput {
			return fmt.Errorf("admin: batch input %q is larger than %d bytes", it.Name, MaxBatchInput)
		}
		size += len(it.Name) + len(it.Data) + 20
	}
	body := make([]byte, 0, size)
	for _, it := range in {
		body = appendFrame(body, it.Name, it.Data)
	}
	path := "http://dmarcd/v1/ingest/batch"
	if orgRef != "" {
		path += "?" + url.Values{"org": {orgRef}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, "POST", path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", BatchStreamType)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("admin socket %s: %w", c.path, err)
		}
		return fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return errNoBatch
	}
	if resp.StatusCode != http.StatusOK {
		var we wireError
		if err := json.NewDecoder(resp.Body).Decode(&we); err != nil {
			return fmt.Errorf("admin socket: status %s", resp.Status)
		}
		return we.err()
	}
	if resp.Header.Get("Content-Type") == BatchStreamType {
		return readBatchStream(resp.Body, len(in), each)
	}
	// A server from before streaming: every answer at once, in order.
	var ans batchAnswer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return fmt.Errorf("admin socket: %w: reading the answer: %w", ErrServerGone, err)
	}
	if len(ans.Results) != len(in) {
		return fmt.Errorf("admin socket: %d answers to %d inputs", len(ans.Results), len(in))
	}
	for i, it := range ans.Results {
		each(i, it.outcome())
	}
	return nil
}

// readBatchStream reads n streamed answer lines, calling each for every
// input once; an input answered twice, an index out of range or an answer
// cut short is an error for the inputs not yet answered.
func readBatchStream(r io.Reader, n int, each func(int, BatchOutcome)) error {
	seen := make([]bool, n)
	dec := json.NewDecoder(bufio.NewReaderSize(r, 32<<10))
	for left := n; left > 0; left-- {
		var ln batchLine
		if err := dec.Decode(&ln); err != nil {
			return fmt.Errorf("admin socket: %w: reading the answer: %d of %d inputs unanswered: %w",
				ErrServerGone, left, n, noEOF(err))
		}
		if ln.I < 0 || ln.I >= n || seen[ln.I] {
			return fmt.Errorf("admin socket: bad answer for input %d of %d", ln.I, n)
		}
		seen[ln.I] = true
		each(ln.I, ln.outcome())
	}
	return nil
}

// outcome is the item as the client returns it.
func (it batchItem) outcome() BatchOutcome {
	switch {
	case it.Error != nil:
		return BatchOutcome{Err: it.Error.err()}
	case it.Result == nil:
		return BatchOutcome{Err: errors.New("server: no result")}
	default:
		return BatchOutcome{Result: it.Result}
	}
}

// Batcher gathers the inputs of concurrent Ingest calls into batches
// (IngestBatch), a few requests in flight at a time: while they are, the
// next batch fills. Inputs larger than MaxBatchInput, and every input
// when the server takes no batches, go one per request (Client.Ingest).
// Close it when done.
type Batcher struct {
	c        *Client
	org      string
	queue    chan *batched
	slots    chan struct{}
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	disabled bool // the server takes no batches
	files    *fileStream
	noFiles  bool // the server takes no file streams, or one could not be opened
}

type batched struct {
	in    BatchInput
	reply chan BatchOutcome
}

// BatcherRequests is how many batch requests a Batcher keeps in flight.
// Answers stream back, so a request keeps its slot only for its slowest
// input while the answered ones already fill the next batch: more slots
// keep those next batches from waiting.
const BatcherRequests = 8

// NewBatcher returns a Batcher of inputs for organization orgRef ("" for
// none), as Client.Ingest takes it.
func (c *Client) NewBatcher(orgRef string) *Batcher {
	b := &Batcher{c: c, org: orgRef, queue: make(chan *batched, MaxBatchInputs),
		slots: make(chan struct{}, BatcherRequests), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// Ingest stores one input as Client.Ingest does (same result, same
// errors), in a batch with others when it is small.
func (b *Batcher) Ingest(ctx context.Context, r io.Reader, name string) (*ingest.Result, error) {
	if f, ok := r.(*os.File); ok {
		if s := b.fileStream(ctx, f); s != nil {
			return s.Ingest(ctx, f, name)
		}
	}
	b.mu.Lock()
	disabled := b.disabled
	b.mu.Unlock()
	if disabled {
		return b.c.Ingest(ctx, r, name, b.org)
	}
	src := &readErr{r: r}
	data, err := readAll(io.LimitReader(src, MaxBatchInput+1), sizeHint(r))
	if src.err != nil {
		return nil, fmt.Errorf("reading the input: %w", src.err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the input: %w", err)
	}
	if len(data) > MaxBatchInput {
		return b.c.Ingest(ctx, io.MultiReader(bytes.NewReader(data), r), name, b.org)
	}
	it := &batched{in: BatchInput{Name: name, Data: data}, reply: make(chan BatchOutcome, 1)}
	select {
	case b.queue <- it:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.stop:
		return nil, errors.New("admin: batcher closed")
	}
	select {
	case out := <-it.reply:
		if errors.Is(out.Err, errNoBatch) {
			return b.c.Ingest(ctx, bytes.NewReader(data), name, b.org)
		}
		return out.Result, out.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fileStream returns the stream a regular file f goes through (see
// ingest_files.go), opening it on first use, or nil when f is no regular
// file or the server takes no files: f is then sent as bytes.
func (b *Batcher) fileStream(ctx context.Context, f *os.File) *fileStream {
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.files == nil && !b.noFiles {
		s, err := b.c.openFileStream(ctx, b.org)
		if err != nil {
			// A server from before file streams, or none to be had: bytes
			// work everywhere.
			b.noFiles = true
			return nil
		}
		b.files = s
	}
	return b.files
}

// sizeHint is the size of r when it is known (a regular file, a
// bytes.Reader), else 0.
func sizeHint(r io.Reader) int {
	switch r := r.(type) {
	case interface{ Len() int }:
		return r.Len()
	case *os.File:
		if st, err := r.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= MaxBatchInput {
			return int(st.Size())
		}
	}
	return 0
}

// readAll is io.ReadAll into a buffer of the expected size: a small report
// file is read in one call (and one more to see its end), not grown from
// 512 bytes in several.
func readAll(r io.Reader, size int) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: the read that finds the end needs room
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // it grew since: let append find the room
		}
	}
}

// loop takes a request slot, then as many queued inputs as a batch holds,
// and sends them.
func (b *Batcher) loop() {
	defer close(b.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case b.slots <- struct{}{}:
		case <-b.stop:
			return
		}
		var batch []*batched
		select {
		case it := <-b.queue:
			batch = append(batch, it)
		case <-b.stop:
			<-b.slots
			return
		}
		size := len(batch[0].in.Data)
	fill:
		for len(batch) < MaxBatchInputs && size < maxBatchBytes {
			select {
			case it := <-b.queue:
				batch = append(batch, it)
				size += len(it.in.Data)
			default:
				break fill
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-b.slots }()
			b.send(batch)
		}()
	}
}

func (b *Batcher) send(batch []*batched) {
	in := make([]BatchInput, len(batch))
	for i, it := range batch {
		in[i] = it.in
	}
	// Each input's caller is answered as soon as its outcome arrives, so
	// the import's job moves on to its next input while the rest of the
	// batch is still being stored.
	answered := make([]bool, len(batch))
	err := b.c.ingestBatch(context.Background(), b.org, in, func(i int, o BatchOutcome) {
		answered[i] = true
		batch[i].reply <- o
	})
	if errors.Is(err, errNoBatch) {
		b.mu.Lock()
		b.disabled = true
		b.mu.Unlock()
	}
	if err != nil {
		for i, it := range batch {
			if !answered[i] {
				it.reply <- BatchOutcome{Err: err}
			}
		}
	}
}

// Close stops the batcher after the batches in flight are answered. Calls
// of Ingest must have returned.
func (b *Batcher) Close() {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.files != nil {
		b.files.Close()
		b.files = nil
	}
}
