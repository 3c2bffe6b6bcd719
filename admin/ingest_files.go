package admin

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// Files by descriptor. An import of report files into a running server
// spent a third of its CPU outside the pipeline: the client read every
// file and copied it into a request, the server copied it out again. Over
// the admin socket, which is a Unix socket, the client can hand the server
// the open files themselves (SCM_RIGHTS), and the server reads each as an
// offline import would. Nothing is read that the client could not read:
// the server gets descriptors the client opened, never a path.
//
// POST /v1/ingest/files with "Connection: Upgrade" and "Upgrade:
// dmarcd-files/1" switches the connection (101) to this protocol:
//
//   - client to server, messages of a uvarint count n, then n names (each a
//     uvarint length and the bytes), the n open files attached as
//     SCM_RIGHTS; a count of 0 ends the inputs.
//   - server to client, one BatchStreamType line per input ({"i": index in
//     the order sent, "result" or "error"}), as soon as it is durable.
//
// The server closes the connection once every input is answered.

// filesProtocol is the Upgrade token of the file stream.
const filesProtocol = "dmarcd-files/1"

// Limits of the file stream.
const (
	// maxFilesPerMessage is how many files one message carries at most.
	maxFilesPerMessage = 64
	// maxFilesInFlight is how many received files a stream ingests at
	// once (as many as an import keeps in flight by default); past it the
	// server reads no further message until one is done.
	maxFilesInFlight = 1024
	maxFilesMessage  = maxFilesPerMessage * (maxFrameName + binary.MaxVarintLen64)
	// fileLinger is how long the client waits for more files to fill a
	// message once it has one to send.
	fileLinger = 200 * time.Microsecond
)

// ingestFiles switches the connection to the file stream and serves it.
func (h *handler) ingestFiles(w http.ResponseWriter, r *http.Request) {
	uc, ok := switchUnix(w, r, filesProtocol, nil)
	if !ok {
		return
	}
	defer uc.Close()
	h.serveFiles(uc, r.URL.Query().Get("org"))
}

// switchUnix switches the connection of r to protocol (its Upgrade token),
// a Unix socket's only. Before answering 101 it calls allow, when not nil,
// with the connection: an error refuses the switch with that error's
// status. It answers every failure itself (ok false).
func switchUnix(w http.ResponseWriter, r *http.Request, protocol string, allow func(*net.UnixConn) error) (uc *net.UnixConn, ok bool) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), protocol) {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: want Upgrade: " + protocol})
		return nil, false
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: the connection cannot be switched"})
		return nil, false
	}
	uc, ok = conn.(*net.UnixConn)
	if !ok || brw.Reader.Buffered() > 0 {
		// Only over a Unix socket, and nothing sent before the switch.
		_, _ = brw.WriteString("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		_ = brw.Flush()
		conn.Close()
		return nil, false
	}
	if allow != nil {
		if err := allow(uc); err != nil {
			we, status := wireErrorOf(err)
			body, _ := json.Marshal(we)
			fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
				status, http.StatusText(status), len(body), body)
			_ = brw.Flush()
			conn.Close()
			return nil, false
		}
	}
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		conn.Close()
		return nil, false
	}
	return uc, true
}

// serveFiles reads the inputs of a file stream, ingests each received file
// concurrently and writes each answer as soon as it is known. Inputs
// received are stored whatever happens to the client afterwards.
func (h *handler) serveFiles(uc *net.UnixConn, org string) {
	ctx := ingest.WithBatchLog(context.Background())
	start := time.Now()
	var (
		mu    sync.Mutex
		items []*batchItem
		wg    sync.WaitGroup
	)
	answers := make(chan batchLine, maxFilesPerMessage)
	written := make(chan struct{})
	go func() {
		defer close(written)
		bw := bufio.NewWriterSize(uc, 32<<10)
		enc := json.NewEncoder(bw)
		for ln := range answers {
			_ = enc.Encode(ln)
			if len(answers) == 0 {
				_ = bw.Flush()
			}
		}
		_ = bw.Flush()
	}()
	// Long-lived workers, as an offline import has: a goroutine per file
	// grew its stack to the pipeline's depth every time.
	type fileJob struct {
		i    int
		it   *batchItem
		f    *os.File
		name string
	}
	jobs := make(chan fileJob)
	worker := func() {
		defer wg.Done()
		for j := range jobs {
			res, err := h.ingestFile(ctx, j.f, j.name, org)
			mu.Lock()
			h.setOutcome(j.it, j.name, res, err)
			line := batchLine{I: j.i, batchItem: *j.it}
			mu.Unlock()
			answers <- line
		}
	}
	workers := 0
	err := readFileMessages(uc, func(name string, f *os.File) {
		mu.Lock()
		i := len(items)
		it := &batchItem{}
		items = append(items, it)
		mu.Unlock()
		j := fileJob{i: i, it: it, f: f, name: name}
		select {
		case jobs <- j: // an idle worker took it
			return
		default:
		}
		// Workers are started as files come, up to maxFilesInFlight.
		if workers < maxFilesInFlight {
			workers++
			wg.Add(1)
			go worker()
		}
		jobs <- j
	})
	close(jobs)
	if err != nil && !errors.Is(err, io.EOF) {
		h.log.Warn("admin file stream ended early", "error", err)
	}
	wg.Wait()
	close(answers)
	<-written
	h.logBatch(items, time.Since(start))
}

// ingestFile stores one received file, read from its start whatever its
// offset, and closes it.
func (h *handler) ingestFile(ctx context.Context, f *os.File, name, org string) (*ingest.Result, error) {
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading the input: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, &store.Error{Kind: store.ErrInvalid, Msg: fmt.Sprintf("%s is not a regular file", name)}
	}
	return h.svc.Ingest(ctx, io.NewSectionReader(f, 0, st.Size()), name, org)
}

// readFileMessages reads the client's messages and calls each with every
// received file and its name, in order, until the end message (nil is
// returned), the connection's end (io.EOF) or a broken message. Files
// received and not handed to each are closed.
func readFileMessages(uc *net.UnixConn, each func(name string, f *os.File)) error {
	var (
		data []byte // bytes received, not yet parsed
		fds  []int  // files received, not yet named
	)
	defer func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}()
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(4*maxFilesPerMessage))
	for {
		// Whole messages first: a read may bring several.
		for {
			names, rest, ok, err := parseFileMessage(data)
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if len(names) == 0 {
				return nil
			}
			if len(fds) < len(names) {
				return fmt.Errorf("file stream: a message names %d files and carries %d", len(names), len(fds))
			}
			for i, name := range names {
				each(name, os.NewFile(uintptr(fds[i]), name))
			}
			fds = fds[len(names):]
			data = rest
		}
		if len(data) > maxFilesMessage {
			return errors.New("file stream: message too long")
		}
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return fmt.Errorf("file stream: %w", perr)
			}
			for i := range msgs {
				got, rerr := syscall.ParseUnixRights(&msgs[i])
				if rerr == nil {
					fds = append(fds, got...)
				}
			}
		}
		if flags&syscall.MSG_CTRUNC != 0 {
			return errors.New("file stream: files lost in transit (the server may be out of file descriptors)")
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

// parseFileMessage parses one message at the start of data: ok is false
// while it is incomplete.
func parseFileMessage(data []byte) (names []string, rest []byte, ok bool, err error) {
	count, k := binary.Uvarint(data)
	switch {
	case k == 0:
		return nil, data, false, nil
	case k < 0 || count > maxFilesPerMessage:
		return nil, nil, false, fmt.Errorf("file stream: bad message (%d files)", count)
	}
	p := data[k:]
	names = make([]string, 0, count)
	for range count {
		n, k := binary.Uvarint(p)
		switch {
		case k == 0:
			return nil, data, false, nil
		case k < 0 || n > maxFrameName:
			return nil, nil, false, fmt.Errorf("file stream: bad name length %d", n)
		case uint64(len(p)-k) < n:
			return nil, data, false, nil
		}
		names = append(names, string(p[k:k+int(n)]))
		p = p[k+int(n):]
	}
	return names, p, true, nil
}

// fileStream is the client's side of a file stream: Ingest queues a file,
// one goroutine sends the queue in messages, another reads the answers.
type fileStream struct {
	conn  *net.UnixConn
	queue chan *streamed
	stop  chan struct{} // closed by Close: send the end message
	sent  chan struct{} // closed when the sender is done
	// broken is closed when the stream breaks (err is set then).
	broken chan struct{}

	mu      sync.Mutex
	pending map[int]*streamed
	err     error // why the stream broke; every later Ingest gets it
}

type streamed struct {
	f     *os.File
	name  string
	reply chan BatchOutcome
}

// errNoRoute means the server does not know the route asked (one from
// before it): the caller does the same another way.
var errNoRoute = errors.New("admin socket: the server does not know this route")

// openFileStream switches a new connection to the admin socket to a file
// stream for organization orgRef ("" for none).
func (c *Client) openFileStream(ctx context.Context, orgRef string) (*fileStream, error) {
	uc, br, err := c.upgrade(ctx, "/v1/ingest/files", orgRef, filesProtocol)
	if err != nil {
		return nil, err
	}
	s := &fileStream{conn: uc, queue: make(chan *streamed, maxFilesPerMessage), stop: make(chan struct{}),
		sent: make(chan struct{}), broken: make(chan struct{}), pending: map[int]*streamed{}}
	go s.send()
	go s.read(br)
	return s, nil
}

// upgrade opens a new connection to the admin socket and switches it to
// protocol with a POST of path for organization orgRef ("" for none). A
// server that does not know path gives errNoRoute; one that refuses the
// switch, its error.
func (c *Client) upgrade(ctx context.Context, path, orgRef, protocol string) (*net.UnixConn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return nil, nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	uc := conn.(*net.UnixConn)
	if orgRef != "" {
		path += "?" + url.Values{"org": {orgRef}}.Encode()
	}
	req := "POST " + path + " HTTP/1.1\r\nHost: dmarcd\r\nContent-Length: 0\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n"
	if _, err := io.WriteString(uc, req); err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	br := bufio.NewReaderSize(uc, 32<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer uc.Close()
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return nil, nil, errNoRoute
		}
		var we wireError
		if err := json.NewDecoder(resp.Body).Decode(&we); err != nil {
			return nil, nil, fmt.Errorf("admin socket: status %s", resp.Status)
		}
		return nil, nil, we.err()
	}
	return uc, br, nil
}

// Ingest stores f, a regular file, as Client.Ingest does, and returns its
// outcome once durable. The caller keeps f open until then and closes it.
func (s *fileStream) Ingest(ctx context.Context, f *os.File, name string) (*ingest.Result, error) {
	it := &streamed{f: f, name: name, reply: make(chan BatchOutcome, 1)}
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
		return nil, errors.New("admin: file stream closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case out := <-it.reply:
		return out.Result, out.Err
	case <-s.broken:
		// Answered just before the break, or never sent.
		select {
		case out := <-it.reply:
			return out.Result, out.Err
		default:
			return nil, s.brokenErr()
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *fileStream) brokenErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// send writes the queued files in messages of up to maxFilesPerMessage,
// then the end message once Close is called.
func (s *fileStream) send() {
	defer close(s.sent)
	next := 0
	var msg []byte
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		var batch []*streamed
		select {
		case it := <-s.queue:
			batch = append(batch, it)
		case <-s.stop:
			_, _ = s.conn.Write([]byte{0}) // the end message
			return
		}
		// The files queued meanwhile go along, and those that come
		// within fileLinger: an import's jobs queue their next files as
		// answers come, a few at a time, and a message per few files
		// cost a sendmsg each.
		linger.Reset(fileLinger)
	fill:
		for len(batch) < maxFilesPerMessage {
			select {
			case it := <-s.queue:
				batch = append(batch, it)
			case <-linger.C:
				break fill
			case <-s.stop:
				break fill
			}
		}
		linger.Stop()
		msg = binary.AppendUvarint(msg[:0], uint64(len(batch)))
		fds := make([]int, len(batch))
		s.mu.Lock()
		for i, it := range batch {
			msg = binary.AppendUvarint(msg, uint64(len(it.name)))
			msg = append(msg, it.name...)
			fds[i] = int(it.f.Fd())
			s.pending[next] = it
			next++
		}
		s.mu.Unlock()
		if err := s.write(msg, syscall.UnixRights(fds...)); err != nil {
			s.fail(fmt.Errorf("admin socket: %w: sending files: %w", ErrServerGone, err))
			return
		}
	}
}

// write sends msg with the files of oob attached to its first bytes.
func (s *fileStream) write(msg, oob []byte) error {
	n, _, err := s.conn.WriteMsgUnix(msg, oob, nil)
	if err != nil {
		return err
	}
	if n < len(msg) {
		_, err = s.conn.Write(msg[n:])
	}
	return err
}

// read delivers each answer line to the input it is for.
func (s *fileStream) read(br *bufio.Reader) {
	dec := json.NewDecoder(br)
	for {
		var ln batchLine
		if err := dec.Decode(&ln); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // answers still owed, or none asked: the stream is over either way
			}
			s.fail(fmt.Errorf("admin socket: %w: reading the answer: %w", ErrServerGone, err))
			return
		}
		s.mu.Lock()
		it := s.pending[ln.I]
		delete(s.pending, ln.I)
		s.mu.Unlock()
		if it == nil {
			s.fail(fmt.Errorf("admin socket: bad answer for input %d", ln.I))
			return
		}
		it.reply <- ln.outcome()
	}
}

// fail breaks the stream: every input not answered gets err, and so does
// every later Ingest.
func (s *fileStream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.broken)
	}
	for i, it := range s.pending {
		it.reply <- BatchOutcome{Err: s.err}
		delete(s.pending, i)
	}
	s.conn.Close()
}

// Close ends the stream once the inputs queued are sent. Calls of Ingest
// must have returned.
func (s *fileStream) Close() {
	close(s.stop)
	<-s.sent
	s.conn.Close()
}
