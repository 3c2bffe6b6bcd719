package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

// Imports the server reads itself. Handing a server open files costs the
// import command a system call or two per file and the kernel a passed
// descriptor each; with reports of five records that was a fifth again of
// the CPU an offline import spends. When the command runs as the user the
// server runs as, it can send the paths instead, and the server runs the
// import as an offline one would (imports.Run over its own pipeline),
// telling the command each input's outcome: nothing is read that the
// command could not read, since the server opens with the same rights.
// For another user (root importing into a server that runs as dmarcd), or
// a server that finds other files at the paths (another mount namespace),
// the server refuses, and the command hands over open files as before.
//
// POST /v1/ingest/import with "Connection: Upgrade" and "Upgrade:
// dmarcd-import/1" switches the connection (101) to this protocol, for a
// client of the server's user only (else 400, kind conflict):
//
//   - client to server, one JSON line: {"paths": [absolute paths], "ids":
//     [{"dev", "ino"} of each], "jobs": N}.
//   - server to client, one JSON line per input, in input order, as its
//     outcome is known: {"item": {"name", "root" (index of the path it was
//     found under), "result" or "error"}, "files": N, "files_done": M}; then
//     a last line {"summary": {...}} (imports.Summary), or {"error": {...}}
//     when the import could not start (kind conflict: a path names another
//     file here) or go on.
//
// Closing the connection stops the import: inputs in flight are stored,
// no other is started.

// importProtocol is the Upgrade token of imports the server reads.
const importProtocol = "dmarcd-import/1"

// Bounds of an import request: its paths, and its bytes.
const (
	maxImportPaths   = 1 << 16
	maxImportRequest = 16 << 20
)

// serverUID is the user the server runs as (a test sets another).
var serverUID = os.Geteuid

// importSummarySent is called after an import's summary is sent and
// before its log line (a test waits there for the client to go).
var importSummarySent = func(context.Context) {}

// ErrImportRefused means the server does not read the files of this
// import itself: it runs as another user than the client, does not see
// the same file at a path (another mount namespace), or is a server from
// before it did; or a path is missing here. The caller hands the files
// over instead.
var ErrImportRefused = errors.New("admin socket: the server does not read these files itself")

type importRequest struct {
	Paths []string `json:"paths"`
	// IDs are the paths' device and inode numbers as the client sees
	// them: a server in another mount namespace (systemd's PrivateTmp,
	// ProtectHome) sees other files, or none, at the same paths.
	IDs  []fileID `json:"ids"`
	Jobs int      `json:"jobs"`
}

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

// importLine is one line of the server's answer.
type importLine struct {
	Item      *importItem      `json:"item,omitempty"`
	Files     int              `json:"files,omitempty"`
	FilesDone int              `json:"files_done,omitempty"`
	Summary   *imports.Summary `json:"summary,omitempty"`
	Error     *wireError       `json:"error,omitempty"`
}

type importItem struct {
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

// importPaths runs an import of the paths the client sends, as an offline
// import would, and streams its progress.
func (h *handler) importPaths(w http.ResponseWriter, r *http.Request) {
	uc, ok := switchUnix(w, r, importProtocol, samePeer)
	if !ok {
		return
	}
	defer uc.Close()
	org := r.URL.Query().Get("org")
	br := bufio.NewReaderSize(uc, 64<<10)
	bw := bufio.NewWriterSize(uc, 32<<10)
	enc := json.NewEncoder(bw)
	fail := func(err error) {
		we, _ := wireErrorOf(err)
		_ = enc.Encode(importLine{Error: &we})
		_ = bw.Flush()
	}
	var req importRequest
	if err := json.NewDecoder(io.LimitReader(br, maxImportRequest)).Decode(&req); err != nil {
		fail(&store.Error{Kind: store.ErrInvalid, Msg: "bad request: want one JSON line of paths: " + err.Error()})
		return
	}
	if err := checkImportPaths(req.Paths, req.IDs); err != nil {
		fail(err)
		return
	}
	// The client closing its end stops the import.
	ctx, cancel := context.WithCancel(ingest.WithBatchLog(context.Background()))
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, br)
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
	sum, err := imports.Run(ctx, req.Paths, imports.Options{
		Jobs: min(max(req.Jobs, 1), imports.MaxJobs),
		Progress: func(it imports.Item, s *imports.Summary) {
			ln := importLine{Item: &importItem{Name: it.Name, Root: it.Root, Result: it.Result}, Files: s.Files, FilesDone: s.FilesDone}
			if it.Err != nil {
				we, _ := wireErrorOf(it.Err)
				ln.Item.Result, ln.Item.Error = nil, &we
			}
			mu.Lock()
			_ = enc.Encode(ln)
			mu.Unlock()
		},
		Fatal: func(err error) bool { return errors.Is(err, ingest.ErrStopped) },
		Ingest: func(ctx context.Context, r io.Reader, d ingest.Arrival) (*ingest.Result, error) {
			return h.svc.Ingest(ctx, r, d.Name, org)
		},
	})
	// Stopped is what the import itself says (cancelled by the client,
	// or the pipeline stopping), known now: once the summary is sent the
	// client closes the connection, which cancels ctx, and ctx at the
	// log line would call every finished import stopped.
	wasStopped := err != nil
	close(stopFlush)
	<-flushed
	var stopped *imports.StoppedError
	switch {
	case errors.As(err, &stopped):
		fail(stopped.Cause)
	case err != nil && ctx.Err() == nil:
		fail(err)
	default:
		_ = enc.Encode(importLine{Summary: sum})
		_ = bw.Flush()
		importSummarySent(ctx)
	}
	if sum != nil {
		h.log.Info("admin import", "files", sum.Files, "inputs", sum.Inputs, "reports", sum.Imported,
			"duplicates", sum.Duplicates, "records", sum.Records, "quarantined", sum.Quarantined, "failed", sum.Failed,
			"stopped", wasStopped, "duration", time.Since(start).Round(time.Millisecond))
	}
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

// Import has the running server import paths (files, folders and mbox
// files, as imports.Run takes them) itself, for organization orgRef ("" for
// none), jobs inputs in flight, and calls progress, when not nil, with
// each input in input order and the summary so far (as imports.Options
// Progress is called). Inputs are named as paths name them, as an offline
// import names them. ErrImportRefused means the server does not read the
// files itself: nothing was imported, and the caller sends them instead.
// When the server goes away the summary says what was done and the error
// is an *imports.StoppedError; when ctx ends, ctx's error.
func (c *Client) Import(ctx context.Context, orgRef string, paths []string, jobs int, progress func(imports.Item, *imports.Summary)) (*imports.Summary, error) {
	roots := make([]importRoot, 0, len(paths))
	req := importRequest{Jobs: jobs}
	for _, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("import: %s: %w", p, err)
		}
		id, err := fileIDOf(a)
		if err != nil {
			// A path this process does not see: the import that sends
			// the files reports it, as an offline import does.
			return nil, ErrImportRefused
		}
		roots = append(roots, importRoot{given: p, abs: a})
		req.Paths, req.IDs = append(req.Paths, a), append(req.IDs, id)
	}
	uc, br, err := c.upgrade(ctx, "/v1/ingest/import", orgRef, importProtocol)
	if errors.Is(err, errNoRoute) || errors.Is(err, store.ErrConflict) {
		return nil, ErrImportRefused
	}
	if err != nil {
		return nil, err
	}
	defer uc.Close()
	line, _ := json.Marshal(req)
	if _, err := uc.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	defer stop()
	sum := &imports.Summary{}
	dec := json.NewDecoder(br)
	for {
		var ln importLine
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
			if progress != nil {
				progress(it, sum)
			}
		case ln.Summary != nil:
			// The inputs told, in input order, made the same summary
			// under the names as given; the server's says how many files
			// and which it left out.
			if ln.Summary.Inputs != sum.Inputs {
				return sum, fmt.Errorf("admin socket: the server's summary counts %d inputs, %d were told", ln.Summary.Inputs, sum.Inputs)
			}
			sum.Files = ln.Summary.Files
			for _, sk := range ln.Summary.Skipped {
				sum.Skipped = append(sum.Skipped, imports.SkippedFile{File: mapImportName(sk.File, roots, -1), Reason: sk.Reason})
			}
			sum.EmptyLists()
			return sum, nil
		case ln.Error != nil:
			if ln.Error.Kind == "conflict" && sum.Inputs == 0 {
				// The server sees other files at these paths.
				return nil, ErrImportRefused
			}
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
