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
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/store"
)

// Importing. Offline, Local.Import runs imports.Run over its own pipeline.
// While a server runs it holds the database, and 'dmarcd import' goes
// through the admin socket with one protocol in two modes:
//
//   - read (import_read.go): the server reads the files itself, as an
//     offline import would (Local.Import over the server's pipeline), and
//     tells the command each input's outcome. Only for a command of the
//     server's user (SO_PEERCRED) whose paths name the same files on the
//     server's side (device and inode: a server with a private /tmp sees
//     other files, or none). The fastest way.
//   - hand-over (import_handover.go): the command walks the paths and
//     opens the files (imports.Run) and hands each input to the server: a
//     regular file as its open descriptor (SCM_RIGHTS: the server needs no
//     right to open it), a small input (an mbox message) as its bytes, a
//     larger one through a pipe the command writes it into. For another
//     user, a server that sees other files at the paths, and --hand-over.
//
// Client.Import tries read and falls back to hand-over when the server
// refuses to read (a conflict); nothing has been imported then.
//
// The wire: POST /v1/import with "Connection: Upgrade", "Upgrade:
// dmarcd-import/2" and a JSON body, the importHeader:
// {"org", "hand_over", "paths", "ids", "jobs"}. The server checks it
// before switching and answers a refusal as any error of the socket: an
// unknown organization (not_found), a read it must not do (conflict:
// another user, another file at a path), a bad request (invalid). Then
// 101, and in read mode the server sends one JSON line per input, in
// input order ({"item": {"name", "root", "result"|"error"}, "files",
// "files_done"}, flushed every 50 ms), then {"summary": ...} or
// {"error": ...}; the command closing the connection stops the import
// (inputs in flight are stored). In hand-over mode the command sends
// messages of inputs (handOverMessage) and the server answers each input
// as soon as it is durable, in the order they become so ({"i": index in
// the order sent, "result"|"error"}), and closes the connection once
// every input sent before the end message is answered.

// importProtocol is the Upgrade token of the import protocol.
const importProtocol = "dmarcd-import/2"

// maxImportRequest bounds the header (its paths).
const maxImportRequest = 16 << 20

// ImportRequest is what Service.Import imports and how.
type ImportRequest struct {
	// Paths are files, folders and mbox files, as imports.Run takes them.
	// Inputs are named as the paths name them.
	Paths []string
	// Org (a name or id) restricts the domain lookup to one organization;
	// "" lets any organization's domain match. An unknown one is
	// store.ErrNotFound before anything is imported.
	Org string
	// Jobs is how many inputs are in flight (imports.Options.Jobs; 0 for
	// imports.DefaultJobs).
	Jobs int
	// HandOver, with a server running, opens the files in this process
	// and hands them to the server even when it could read them itself.
	// It changes nothing offline.
	HandOver bool
	// Progress, when not nil, is called after each input, in input order,
	// with its outcome and the summary so far (imports.Options.Progress).
	Progress func(imports.Item, *imports.Summary)
}

// errImportRefused means the server does not read the files of this
// import itself: it runs as another user than the client, does not see
// the same file at a path (another mount namespace), or a path is missing
// on the client's side. Client.Import hands the files over instead.
var errImportRefused = errors.New("admin socket: the server does not read these files itself")

// Import runs the import through the pipeline, as an offline import does.
// Errors: errNoPipeline, store.ErrNotFound for an unknown req.Org, ctx's
// when cancelled (the summary says what was done), and an
// *imports.StoppedError when the pipeline stopped mid-way.
func (l *Local) Import(ctx context.Context, req ImportRequest) (*imports.Summary, error) {
	if l.Pipeline == nil {
		return nil, errNoPipeline
	}
	orgID, err := l.orgID(req.Org)
	if err != nil {
		return nil, err
	}
	return imports.Run(ctx, req.Paths, imports.Options{
		Ingest:   l.Pipeline.Ingest,
		OrgID:    orgID,
		Jobs:     req.Jobs,
		Progress: req.Progress,
		Fatal:    func(err error) bool { return errors.Is(err, ingest.ErrStopped) },
	})
}

// orgID is the id of the organization ref names, "" for "".
func (l *Local) orgID(ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	org, err := l.DB.FindOrganization(ref)
	if err != nil {
		return "", err
	}
	return org.ID, nil
}

// Import has the running server import req: it reads the files itself
// when it can, else they are handed over (see above). The errors are
// Local.Import's, and when the server goes away mid-way an
// *imports.StoppedError of ErrServerGone, with the summary of what was
// done.
func (c *Client) Import(ctx context.Context, req ImportRequest) (*imports.Summary, error) {
	if !req.HandOver {
		sum, err := c.importRead(ctx, req)
		if !errors.Is(err, errImportRefused) {
			return sum, err
		}
	}
	return c.importHandOver(ctx, req)
}

// importHeader is the body of the request that opens an import.
type importHeader struct {
	Org string `json:"org,omitempty"`
	// HandOver selects hand-over mode; else the server reads Paths.
	HandOver bool `json:"hand_over,omitempty"`
	// Paths are absolute; IDs are their device and inode numbers as the
	// client sees them: a server in another mount namespace (systemd's
	// PrivateTmp, ProtectHome) sees other files, or none, at the same
	// paths.
	Paths []string `json:"paths,omitempty"`
	IDs   []fileID `json:"ids,omitempty"`
	Jobs  int      `json:"jobs,omitempty"`
}

func (h *handler) importRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/import", h.importStart)
}

// importStart checks the import asked for, switches the connection to the
// import protocol and serves the mode asked for.
func (h *handler) importStart(w http.ResponseWriter, r *http.Request) {
	var hdr importHeader
	dec := json.NewDecoder(io.LimitReader(r.Body, maxImportRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&hdr); err != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: want the import as a JSON object: " + err.Error()})
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	var orgID string
	uc, ok := switchUnix(w, r, importProtocol, func(uc *net.UnixConn) error {
		if h.svc.Pipeline == nil {
			return errNoPipeline
		}
		var err error
		if orgID, err = h.svc.orgID(hdr.Org); err != nil {
			return err
		}
		if hdr.HandOver {
			return nil
		}
		if err := samePeer(uc); err != nil {
			return err
		}
		return checkImportPaths(hdr.Paths, hdr.IDs)
	})
	if !ok {
		return
	}
	defer uc.Close()
	if hdr.HandOver {
		h.serveHandOver(uc, orgID)
		return
	}
	h.serveRead(uc, hdr, orgID)
}

// logImport writes an import's info line: counts only, no names (the
// pipeline's line per input goes to debug, see ingest.WithBatchLog).
func (h *handler) logImport(mode string, sum *imports.Summary, stopped bool, took time.Duration) {
	attrs := []any{"mode", mode, "files", sum.Files, "inputs", sum.Inputs, "reports", sum.Imported,
		"failure_reports", sum.FailureReports, "tls_reports", sum.TLSReports, "duplicates", sum.Duplicates,
		"records", sum.Records, "quarantined", sum.Quarantined, "failed", sum.Failed,
		"stopped", stopped, "duration", took.Round(time.Millisecond)}
	if sum.DifferentContent > 0 {
		attrs = append(attrs, "different_content", sum.DifferentContent)
	}
	h.log.Info("admin import", attrs...)
}

// logInputError logs an input's error that is not the input's (not a
// store.Error): the server's.
func (h *handler) logInputError(name string, err error) {
	var se *store.Error
	if err != nil && !errors.As(err, &se) {
		h.log.Error("admin input failed", "name", name, "error", err)
	}
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

// errOldServer means the server does not know the import protocol: it is
// a dmarcd from before it, still running after an upgrade.
var errOldServer = errors.New("the running server is an older dmarcd that does not know this import: restart it, or stop it to import offline")

// openImport opens a new connection to the admin socket and switches it to
// the import protocol with hdr. A refusal is the server's error, with its
// kind.
func (c *Client) openImport(ctx context.Context, hdr importHeader) (*net.UnixConn, *bufio.Reader, error) {
	body, err := json.Marshal(hdr)
	if err != nil {
		return nil, nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		return nil, nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	uc := conn.(*net.UnixConn)
	req := "POST /v1/import HTTP/1.1\r\nHost: dmarcd\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: Upgrade\r\nUpgrade: " + importProtocol + "\r\n\r\n"
	if _, err := uc.Write(append([]byte(req), body...)); err != nil {
		uc.Close()
		return nil, nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	defer stop()
	br := bufio.NewReaderSize(uc, 32<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		uc.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("admin socket %s: %w: %w", c.path, ErrServerGone, err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return uc, br, nil
	}
	defer uc.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return nil, nil, fmt.Errorf("admin socket %s: %w", c.path, errOldServer)
	}
	var we wireError
	if err := json.NewDecoder(resp.Body).Decode(&we); err != nil {
		return nil, nil, fmt.Errorf("admin socket: status %s", resp.Status)
	}
	return nil, nil, we.err()
}
