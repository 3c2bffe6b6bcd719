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
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/store"
)

// Hand-over mode: the import command walks the paths and hands each input
// to the server. An import of report files spent a third of its CPU
// outside the pipeline when the command read every file and copied it into
// a request and the server copied it out again; over a Unix socket the
// command hands the server the open files themselves (SCM_RIGHTS), and the
// server reads each as an offline import would. Nothing is read that the
// command could not read: the server gets descriptors the command opened,
// never a path. Inputs that are no file (the messages of an mbox) go as
// their bytes, many to a message, so that they share the server's commits
// as they would offline; one larger than maxInline goes through a pipe,
// which the server reads as a stream.
//
// A handOverMessage, from the command: a uvarint count n (1 to
// maxInputsPerMessage; 0 ends the inputs), then n inputs, each a uvarint
// name length, the name, and a uvarint v: 0 for a descriptor attached to
// the message (SCM_RIGHTS, in order), else v-1 bytes of the input inline.
// The server reads a descriptor from its start whatever its offset, takes
// regular files and pipes only, and closes every descriptor it got.

// Limits of hand-over mode.
const (
	// maxInputsPerMessage is how many inputs one message carries at most.
	maxInputsPerMessage = 64
	// maxInline is the largest input sent as bytes in a message.
	maxInline = 1 << 20
	// maxMessageInline is how many inline bytes the client puts in one
	// message (past one input's).
	maxMessageInline = 4 << 20
	// maxInputName bounds an input's name.
	maxInputName = 4096
	// maxMessage bounds a message the server reads.
	maxMessage = maxMessageInline + maxInline + maxInputsPerMessage*(maxInputName+2*binary.MaxVarintLen64) + binary.MaxVarintLen64
	// maxInputsInFlight is how many received inputs the server ingests at
	// once (as many as an import keeps in flight by default); past it the
	// server reads no further message until one is done.
	maxInputsInFlight = 1024
	// messageLinger is how long the client waits for more inputs to fill
	// a message once it has one to send: an import's jobs queue their
	// next inputs as answers come, a few at a time, and a message per few
	// inputs cost a sendmsg each.
	messageLinger = 200 * time.Microsecond
)

// handOverAnswer is the server's answer for one input: its result or its
// error.
type handOverAnswer struct {
	I      int            `json:"i"` // index of the input in the order sent
	Result *ingest.Result `json:"result,omitempty"`
	Error  *wireError     `json:"error,omitempty"`
}

// outcome is what happened to one input handed over: its result or its
// error.
type outcome struct {
	res *ingest.Result
	err error
}

// outcome is the answer as the client returns it.
func (a *handOverAnswer) outcome() outcome {
	switch {
	case a.Error != nil:
		return outcome{err: a.Error.err()}
	case a.Result == nil:
		return outcome{err: errors.New("server: no result")}
	default:
		return outcome{res: a.Result}
	}
}

// received is one input the server got: a descriptor or bytes.
type received struct {
	name string
	f    *os.File
	data []byte
}

// serveHandOver reads the inputs of a hand-over, ingests them
// concurrently for organization orgID and writes each answer as soon as it
// is known. Inputs received are stored whatever happens to the client
// afterwards.
func (h *handler) serveHandOver(uc *net.UnixConn, orgID string) {
	ctx := ingest.WithBatchLog(context.Background())
	start := time.Now()
	answers := make(chan handOverAnswer, maxInputsPerMessage)
	written := make(chan struct{})
	go func() {
		defer close(written)
		bw := bufio.NewWriterSize(uc, 32<<10)
		enc := json.NewEncoder(bw)
		for a := range answers {
			_ = enc.Encode(a)
			if len(answers) == 0 {
				_ = bw.Flush()
			}
		}
		_ = bw.Flush()
	}()
	var (
		mu  sync.Mutex
		sum imports.Summary
		wg  sync.WaitGroup
	)
	// Long-lived workers, as an offline import has: a goroutine per input
	// grew its stack to the pipeline's depth every time.
	type job struct {
		i  int
		in received
	}
	jobs := make(chan job)
	worker := func() {
		defer wg.Done()
		for j := range jobs {
			res, err := h.ingestReceived(ctx, j.in, orgID)
			a := handOverAnswer{I: j.i, Result: res}
			if err != nil {
				h.logInputError(j.in.name, err)
				we, _ := wireErrorOf(err)
				a.Result, a.Error = nil, &we
			}
			mu.Lock()
			sum.Add(imports.Item{Name: j.in.name, Result: res, Err: err})
			mu.Unlock()
			answers <- a
		}
	}
	n, workers := 0, 0
	err := readHandOver(uc, func(in received) {
		j := job{i: n, in: in}
		n++
		select {
		case jobs <- j: // an idle worker took it
			return
		default:
		}
		// Workers are started as inputs come, up to maxInputsInFlight.
		if workers < maxInputsInFlight {
			workers++
			wg.Add(1)
			go worker()
		}
		jobs <- j
	})
	close(jobs)
	if err != nil && !errors.Is(err, io.EOF) {
		h.log.Warn("admin import ended early", "error", err)
	}
	wg.Wait()
	close(answers)
	<-written
	h.logImport("hand-over", &sum, err != nil, time.Since(start))
}

// ingestReceived stores one received input and closes its descriptor: a
// regular file read from its start, a pipe to its end, bytes as they are.
func (h *handler) ingestReceived(ctx context.Context, in received, orgID string) (*ingest.Result, error) {
	d := ingest.Arrival{Source: ingest.SourceImport, OrgID: orgID, Name: in.name}
	if in.f == nil {
		return h.svc.Pipeline.Ingest(ctx, bytes.NewReader(in.data), d)
	}
	defer in.f.Close()
	st, err := in.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the input: %w", err)
	}
	switch {
	case st.Mode().IsRegular():
		return h.svc.Pipeline.Ingest(ctx, io.NewSectionReader(in.f, 0, st.Size()), d)
	case st.Mode()&os.ModeNamedPipe != 0:
		return h.svc.Pipeline.Ingest(ctx, in.f, d)
	}
	return nil, &store.Error{Kind: store.ErrInvalid, Msg: fmt.Sprintf("%s is not a regular file or a pipe", in.name)}
}

// readHandOver reads the client's messages and calls each with every
// input received, in order, until the end message (nil is returned), the
// connection's end (io.EOF) or a broken message. Descriptors received and
// not handed to each are closed.
func readHandOver(uc *net.UnixConn, each func(received)) error {
	var (
		data []byte // bytes received, not yet parsed
		fds  []int  // descriptors received, not yet handed out
	)
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4*maxInputsPerMessage))
	for {
		// Whole messages first: a read may bring several.
		for {
			ins, files, rest, ok, err := parseHandOver(data)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if len(ins) == 0 {
				return nil
			}
			if len(fds) < files {
				return fmt.Errorf("import: a message names %d files and carries %d", files, len(fds))
			}
			for _, in := range ins {
				if in.data == nil {
					in.f = os.NewFile(uintptr(fds[0]), in.name)
					fds = fds[1:]
				}
				each(in)
			}
			data = rest
		}
		if len(data) > maxMessage {
			return errors.New("import: message too long")
		}
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return fmt.Errorf("import: %w", perr)
			}
			for i := range msgs {
				got, rerr := syscall.ParseUnixRights(&msgs[i])
				if rerr == nil {
					fds = append(fds, got...)
				}
			}
		}
		if flags&syscall.MSG_CTRUNC != 0 {
			return errors.New("import: files lost in transit (the server may be out of file descriptors)")
		}
		data = append(data, buf[:n]...)
		if err != nil {
			return err
		}
		if n == 0 && oobn == 0 {
			return io.EOF
		}
	}
}

// parseHandOver parses one message at the start of data: ok is false while
// it is incomplete; files counts its inputs that are descriptors (their f
// is left nil, their data nil too). Inline bytes are copied out of data.
func parseHandOver(data []byte) (ins []received, files int, rest []byte, ok bool, err error) {
	count, k := binary.Uvarint(data)
	switch {
	case k == 0:
		return nil, 0, data, false, nil
	case k < 0 || count > maxInputsPerMessage:
		return nil, 0, nil, false, fmt.Errorf("import: bad message (%d inputs)", count)
	}
	p := data[k:]
	ins = make([]received, 0, count)
	for range count {
		n, k := binary.Uvarint(p)
		switch {
		case k == 0:
			return nil, 0, data, false, nil
		case k < 0 || n > maxInputName:
			return nil, 0, nil, false, fmt.Errorf("import: bad name length %d", n)
		case uint64(len(p)-k) < n:
			return nil, 0, data, false, nil
		}
		in := received{name: string(p[k : k+int(n)])}
		p = p[k+int(n):]
		v, k := binary.Uvarint(p)
		switch {
		case k == 0:
			return nil, 0, data, false, nil
		case k < 0 || v > maxInline+1:
			return nil, 0, nil, false, fmt.Errorf("import: input %q: bad size", in.name)
		case v == 0:
			files++
			p = p[k:]
		case uint64(len(p)-k) < v-1:
			return nil, 0, data, false, nil
		default:
			in.data = bytes.Clone(p[k : k+int(v-1)])
			if in.data == nil {
				in.data = []byte{}
			}
			p = p[k+int(v-1):]
		}
		ins = append(ins, in)
	}
	return ins, files, p, true, nil
}

// appendHandOver appends the message of ins to msg and returns it with the
// descriptors to attach, in order.
func appendHandOver(msg []byte, ins []*handed) ([]byte, []int) {
	var fds []int
	msg = binary.AppendUvarint(msg, uint64(len(ins)))
	for _, it := range ins {
		msg = binary.AppendUvarint(msg, uint64(len(it.name)))
		msg = append(msg, it.name...)
		if it.f != nil {
			msg = binary.AppendUvarint(msg, 0)
			fds = append(fds, int(it.f.Fd()))
			continue
		}
		msg = binary.AppendUvarint(msg, uint64(len(it.data))+1)
		msg = append(msg, it.data...)
	}
	return msg, fds
}

// importHandOver runs the import of req here, handing every input to the
// server.
func (c *Client) importHandOver(ctx context.Context, req ImportRequest) (*imports.Summary, error) {
	s, err := c.openHandOver(ctx, req.Org)
	if err != nil {
		return nil, err
	}
	defer s.Close(ctx)
	return imports.Run(ctx, req.Paths, imports.Options{
		Ingest:   s.ingest,
		Jobs:     req.Jobs,
		Progress: req.Progress,
		Fatal:    func(err error) bool { return errors.Is(err, ErrServerGone) },
	})
}

// handOver is the client's side of a hand-over: ingest queues an input,
// one goroutine sends the queue in messages, another reads the answers.
type handOver struct {
	conn  *net.UnixConn
	queue chan *handed
	stop  chan struct{} // closed by Close: send the end message
	sent  chan struct{} // closed when the sender is done
	over  chan struct{} // closed when the reader is done: the stream is over
	// broken is closed when the stream breaks (err is set then).
	broken chan struct{}

	closing sync.Once
	mu      sync.Mutex
	pending map[int]*handed
	err     error // why the stream broke; every later input gets it
}

// handed is one input handed over: a descriptor, or its bytes.
type handed struct {
	name  string
	f     *os.File
	data  []byte
	taken chan struct{} // closed once the sender is done with it
	reply chan outcome
}

// openHandOver switches a new connection to the admin socket to a
// hand-over for organization orgRef ("" for none).
func (c *Client) openHandOver(ctx context.Context, orgRef string) (*handOver, error) {
	uc, br, err := c.openImport(ctx, importHeader{Org: orgRef, HandOver: true})
	if err != nil {
		return nil, err
	}
	s := &handOver{conn: uc, queue: make(chan *handed, maxInputsPerMessage), stop: make(chan struct{}),
		sent: make(chan struct{}), over: make(chan struct{}), broken: make(chan struct{}), pending: map[int]*handed{}}
	go s.send()
	go s.read(br)
	return s, nil
}

// ingest hands one input to the server and returns its outcome once it is
// durable: the ingest.IngestFunc of an import handed over (d.Name names
// it; the organization is the hand-over's). A regular file goes as its
// descriptor, which the caller keeps open until then; another input is
// read here and goes as its bytes.
func (s *handOver) ingest(ctx context.Context, r io.Reader, d ingest.Arrival) (*ingest.Result, error) {
	it := &handed{name: d.Name, taken: make(chan struct{}), reply: make(chan outcome, 1)}
	if f, ok := r.(*os.File); ok && isRegular(f) {
		it.f = f
	} else {
		data, err := readAll(r, sizeHint(r))
		if err != nil {
			return nil, fmt.Errorf("reading the input: %w", err)
		}
		it.data = data
		if len(data) > maxInline {
			// Too large for a message: the server reads it from a pipe.
			pr, pw, err := os.Pipe()
			if err != nil {
				return nil, fmt.Errorf("reading the input: %w", err)
			}
			defer pr.Close()
			go func() {
				_, _ = pw.Write(data)
				pw.Close()
			}()
			it.f, it.data = pr, nil
		}
	}
	return s.hand(ctx, it)
}

// hand queues it and waits for its answer.
func (s *handOver) hand(ctx context.Context, it *handed) (*ingest.Result, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case s.queue <- it:
	case <-s.broken:
		return nil, s.brokenErr()
	case <-s.stop:
		return nil, errors.New("admin: import closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case o := <-it.reply:
		return o.res, o.err
	case <-s.broken:
		// Answered just before the break, or never sent.
		select {
		case o := <-it.reply:
			return o.res, o.err
		default:
			s.release(it)
			return nil, s.brokenErr()
		}
	case <-ctx.Done():
		// The import is over: so is its hand-over (what the server got
		// is stored all the same).
		s.fail(ctx.Err())
		s.release(it)
		return nil, ctx.Err()
	}
}

// release waits until the sender is done with it, which the caller may
// then close: a descriptor closed before it is sent could be another
// file's by then.
func (s *handOver) release(it *handed) {
	select {
	case <-it.taken:
	case <-s.sent:
	}
}

func (s *handOver) brokenErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// send writes the queued inputs in messages, then the end message once
// Close is called.
func (s *handOver) send() {
	defer close(s.sent)
	next := 0
	var msg []byte
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		var batch []*handed
		select {
		case it := <-s.queue:
			batch = append(batch, it)
		case <-s.stop:
			_, _ = s.conn.Write([]byte{0}) // the end message
			return
		}
		// The inputs queued meanwhile go along, and those that come
		// within messageLinger.
		inline := len(batch[0].data)
		linger.Reset(messageLinger)
	fill:
		for len(batch) < maxInputsPerMessage && inline < maxMessageInline {
			select {
			case it := <-s.queue:
				batch = append(batch, it)
				inline += len(it.data)
			case <-linger.C:
				break fill
			case <-s.stop:
				break fill
			}
		}
		linger.Stop()
		var fds []int
		msg, fds = appendHandOver(msg[:0], batch)
		s.mu.Lock()
		for _, it := range batch {
			s.pending[next] = it
			next++
		}
		s.mu.Unlock()
		var oob []byte
		if len(fds) > 0 {
			oob = syscall.UnixRights(fds...)
		}
		err := s.write(msg, oob)
		for _, it := range batch {
			close(it.taken)
		}
		if err != nil {
			s.fail(fmt.Errorf("admin socket: %w: sending inputs: %w", ErrServerGone, err))
			return
		}
	}
}

// write sends msg with the descriptors of oob attached to its first bytes.
func (s *handOver) write(msg, oob []byte) error {
	n, _, err := s.conn.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if n < len(msg) {
		_, err = s.conn.Write(msg[n:])
	}
	return err
}

// read delivers each answer to the input it is for.
func (s *handOver) read(br *bufio.Reader) {
	defer close(s.over)
	dec := json.NewDecoder(br)
	for {
		var a handOverAnswer
		if err := dec.Decode(&a); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // answers still owed, or none asked: the stream is over either way
			}
			s.fail(fmt.Errorf("admin socket: %w: reading the answer: %w", ErrServerGone, err))
			return
		}
		s.mu.Lock()
		it := s.pending[a.I]
		delete(s.pending, a.I)
		s.mu.Unlock()
		if it == nil {
			s.fail(fmt.Errorf("admin socket: bad answer for input %d", a.I))
			return
		}
		it.reply <- a.outcome()
	}
}

// fail breaks the stream: every input not answered gets err, and so does
// every later one.
func (s *handOver) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.broken)
	}
	for i, it := range s.pending {
		it.reply <- outcome{err: s.err}
		delete(s.pending, i)
	}
	s.conn.Close()
}

// Close ends the hand-over once the inputs queued are sent, and waits for
// the server to end it in turn, having answered them all. When ctx has
// ended (the import was stopped) it closes the connection at once instead,
// which the server logs as a stopped import. Calls of ingest must have
// returned. Later calls do nothing.
func (s *handOver) Close(ctx context.Context) {
	s.closing.Do(func() {
		if ctx.Err() != nil {
			s.conn.Close()
		}
		close(s.stop)
		<-s.sent
		select {
		case <-s.over:
		case <-ctx.Done():
		}
		s.conn.Close()
	})
}

// isRegular reports whether f is a regular file.
func isRegular(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular()
}

// sizeHint is the size of r when it is known (a regular file, a
// bytes.Reader), else 0.
func sizeHint(r io.Reader) int {
	switch r := r.(type) {
	case interface{ Len() int }:
		return r.Len()
	case *os.File:
		if st, err := r.Stat(); err == nil && st.Mode().IsRegular() && st.Size() <= maxInline {
			return int(st.Size())
		}
	}
	return 0
}

// readAll is io.ReadAll into a buffer of the expected size: a small input
// is read in one call (and one more to see its end), not grown from 512
// bytes in several.
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
