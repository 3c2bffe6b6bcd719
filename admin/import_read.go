package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/store"
)

// Read mode: the server reads the files itself. Handing a server open
// files costs the import command a system call or two per file and the
// kernel a passed descriptor each; with reports of five records that was a
// fifth again of the CPU an offline import spends. When the command runs
// as the user the server runs as, it sends the paths instead, and the
// server runs the import as an offline one would: nothing is read that
// the command could not read, since the server opens with the same
// rights.

// maxImportPaths bounds the paths of one import.
const maxImportPaths = 1 << 16

// serverUID is the user the server runs as (a test sets another).
var serverUID = os.Geteuid

// fileID names a file on a machine: its device and inode numbers.
type fileID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// fileIDOf returns the file ID of path, following symbolic links.
func fileIDOf(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, errors.New("no device and inode numbers")
	}
	return fileID{Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// readLine is one line of the server's answer in read mode.
type readLine struct {
	Item      *readItem        `json:"item,omitempty"`
	Files     int              `json:"files,omitempty"`
	FilesDone int              `json:"files_done,omitempty"`
	Summary   *imports.Summary `json:"summary,omitempty"`
	Error     *wireError       `json:"error,omitempty"`
}

type readItem struct {
	Name   string         `json:"name"`
	Root   int            `json:"root"` // index of the path it was found under
	Result *ingest.Result `json:"result,omitempty"`
	Error  *wireError     `json:"error,omitempty"`
}

// samePeer refuses a client that runs as another user than the server.
func samePeer(uc *net.UnixConn) error {
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if credErr != nil {
		return credErr
	}
	if int(cred.Uid) != serverUID() {
		return &store.Error{Kind: store.ErrConflict, Msg: fmt.Sprintf(
			"the server runs as user %d, the import as user %d: the server does not open files for another user", serverUID(), cred.Uid)}
	}
	return nil
}

// checkImportPaths refuses what the server must not be asked to read: no
// path, too many, one that is not absolute (the server's working folder
// is not the client's), and, as a conflict, a path where the server does
// not find the file the client found.
func checkImportPaths(paths []string, ids []fileID) error {
	if len(paths) == 0 || len(paths) > maxImportPaths || len(ids) != len(paths) {
		return &store.Error{Kind: store.ErrInvalid, Msg: fmt.Sprintf("bad request: want 1 to %d paths, each with its file id", maxImportPaths)}
	}
	for _, p := range paths {
		if !filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
			return &store.Error{Kind: store.ErrInvalid, Msg: fmt.Sprintf("bad request: path %q is not absolute", p)}
		}
	}
	for i, p := range paths {
		if id, err := fileIDOf(p); err != nil || id != ids[i] {
			return &store.Error{Kind: store.ErrConflict, Msg: fmt.Sprintf(
				"the server does not see the file the import names %s (a private /tmp or a protected home?)", p)}
		}
	}
	return nil
}

// serveRead runs an import of the paths of hdr, as an offline import
// would, and streams its progress.
func (h *handler) serveRead(uc *net.UnixConn, hdr importHeader, orgID string) {
	bw := bufio.NewWriterSize(uc, 32<<10)
	enc := json.NewEncoder(bw)
	fail := func(err error) {
		we, _ := wireErrorOf(err)
		_ = enc.Encode(readLine{Error: &we})
		_ = bw.Flush()
	}
	// The client closing its end stops the import.
	ctx, cancel := context.WithCancel(ingest.WithBatchLog(context.Background()))
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, uc)
		cancel()
	}()
	// Lines are written as inputs finish and flushed every 50 ms: a
	// write per input of five records would cost more than its line.
	var mu sync.Mutex
	stopFlush := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				mu.Lock()
				_ = bw.Flush()
				mu.Unlock()
			case <-stopFlush:
				return
			}
		}
	}()
	start := time.Now()
	sum, err := h.svc.Import(ctx, ImportRequest{
		Paths: hdr.Paths,
		Org:   orgID,
		Jobs:  min(max(hdr.Jobs, 1), imports.MaxJobs),
		Progress: func(it imports.Item, s *imports.Summary) {
			ln := readLine{Item: &readItem{Name: it.Name, Root: it.Root, Result: it.Result}, Files: s.Files, FilesDone: s.FilesDone}
			if it.Err != nil {
				we, _ := wireErrorOf(it.Err)
				ln.Item.Result, ln.Item.Error = nil, &we
			}
			mu.Lock()
			_ = enc.Encode(ln)
			mu.Unlock()
		},
	})
	close(stopFlush)
	<-flushed
	// The line is logged before the last answer: a client done is a
	// client whose import is in the log. Stopped is what the import
	// itself says (cancelled by the client, or the pipeline stopping),
	// not ctx, which a client closing once it is done cancels too.
	if sum != nil {
		h.logImport("read", sum, err != nil, time.Since(start))
	}
	var stopped *imports.StoppedError
	switch {
	case errors.As(err, &stopped):
		fail(stopped.Cause)
	case err != nil && ctx.Err() == nil:
		fail(err)
	default:
		_ = enc.Encode(readLine{Summary: sum})
		_ = bw.Flush()
	}
}

// importRead has the server read the paths of req itself (see above).
// errImportRefused means it does not: nothing was imported, and the
// caller hands the files over instead.
func (c *Client) importRead(ctx context.Context, req ImportRequest) (*imports.Summary, error) {
	roots := make([]importRoot, 0, len(req.Paths))
	hdr := importHeader{Org: req.Org, Jobs: req.Jobs}
	if hdr.Jobs <= 0 {
		hdr.Jobs = imports.DefaultJobs
	}
	for _, p := range req.Paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("import: %s: %w", p, err)
		}
		id, err := fileIDOf(a)
		if err != nil {
			// A path this process does not see: the import that hands
			// the files over reports it, as an offline import does.
			return nil, errImportRefused
		}
		roots = append(roots, importRoot{given: p, abs: a})
		hdr.Paths, hdr.IDs = append(hdr.Paths, a), append(hdr.IDs, id)
	}
	uc, br, err := c.openImport(ctx, hdr)
	if errors.Is(err, store.ErrConflict) {
		return nil, errImportRefused
	}
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	defer stop()
	sum := &imports.Summary{}
	dec := json.NewDecoder(br)
	for {
		var ln readLine
		if err := dec.Decode(&ln); err != nil {
			sum.EmptyLists()
			if ctx.Err() != nil {
				return sum, ctx.Err()
			}
			return sum, &imports.StoppedError{Cause: fmt.Errorf("%w: reading the import's progress: %w", ErrServerGone, err)}
		}
		switch {
		case ln.Item != nil:
			it := imports.Item{Name: mapImportName(ln.Item.Name, roots, ln.Item.Root), Result: ln.Item.Result, Root: ln.Item.Root}
			if e := ln.Item.Error; e != nil {
				it.Result, it.Err = nil, itemError(e)
			} else if it.Result == nil {
				it.Err = errors.New("ingest: no result")
			}
			sum.Add(it)
			sum.Files, sum.FilesDone = ln.Files, ln.FilesDone
			if req.Progress != nil {
				req.Progress(it, sum)
			}
		case ln.Summary != nil:
			// The inputs told, in input order, made the same summary
			// under the names as given; the server's says how many files
			// and which it left out.
			if ln.Summary.Inputs != sum.Inputs {
				return sum, fmt.Errorf("admin socket: the server's summary counts %d inputs, %d were told", ln.Summary.Inputs, sum.Inputs)
			}
			// Done, every file is: the last item may have come before
			// its file was counted done.
			sum.Files, sum.FilesDone = ln.Summary.Files, ln.Summary.Files
			for _, sk := range ln.Summary.Skipped {
				sum.Skipped = append(sum.Skipped, imports.SkippedFile{File: mapImportName(sk.File, roots, -1), Reason: sk.Reason})
			}
			sum.EmptyLists()
			return sum, nil
		case ln.Error != nil:
			sum.EmptyLists()
			err := ln.Error.err()
			if errors.Is(err, ErrServerGone) {
				return sum, &imports.StoppedError{Cause: err}
			}
			return sum, err
		}
	}
}

// itemError is an input's error as the client shows it: a store error
// with its kind, any other with the server's message as it is, as an
// offline import would show it.
func itemError(we *wireError) error {
	if _, ok := kinds[we.Kind]; ok || we.Kind == "stopping" {
		return we.err()
	}
	return errors.New(we.Message)
}

// importRoot is a path as given to Import and as sent.
type importRoot struct{ given, abs string }

// mapImportName names an input found under roots[root] under that path as
// given rather than its absolute form. Without that root (a server that
// did not say), the root with the longest absolute path it is under.
func mapImportName(name string, roots []importRoot, root int) string {
	if root >= 0 && root < len(roots) && underRoot(name, roots[root]) {
		return roots[root].under(name)
	}
	best := -1
	for i, r := range roots {
		if underRoot(name, r) && (best < 0 || len(r.abs) > len(roots[best].abs)) {
			best = i
		}
	}
	if best < 0 {
		return name
	}
	return roots[best].under(name)
}

// underRoot tells whether name is r's path, a message of it, or under it.
func underRoot(name string, r importRoot) bool {
	if !strings.HasPrefix(name, r.abs) {
		return false
	}
	rest := name[len(r.abs):]
	return rest == "" || rest[0] == '#' || rest[0] == filepath.Separator || r.abs == string(filepath.Separator)
}

// under names name, which is under r, under r's path as given.
func (r importRoot) under(name string) string {
	rest := name[len(r.abs):]
	switch {
	case rest == "" || rest[0] == '#':
		return r.given + rest
	case r.abs == string(filepath.Separator):
		return filepath.Join(r.given, rest)
	default:
		return filepath.Join(r.given, rest[1:])
	}
}
