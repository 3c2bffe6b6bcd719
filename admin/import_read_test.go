package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/store"
)

// TestImportServerReads ensures an import the server reads itself gives
// what an offline import of the same paths gives: the same inputs in the
// same order under the names the paths give (a relative folder, a missing
// file, mbox messages), the same outcomes and the same summary, and that
// the reports are stored. Quarantine ids differ between the two stores and
// are left out of the comparison.
func TestImportServerReads(t *testing.T) {
	db, _, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	offDB, offLocal, _ := serveIntake(t)
	offOrg := mustAcmeExample(t, offDB)
	dir := ingesttest.ImportTree(t)
	t.Chdir(filepath.Dir(dir))
	rel := filepath.Base(dir) + string(filepath.Separator) // relative, with a trailing slash
	paths := []string{filepath.Join(dir, "inbox.mbox"), rel, filepath.Join(dir, "a.xml")}

	var got []imports.Item
	var files []int
	sum, err := c.importRead(context.Background(), ImportRequest{Paths: paths, Org: org.ID, Jobs: 4, Progress: func(it imports.Item, s *imports.Summary) {
		got = append(got, it)
		files = append(files, s.Files)
	}})
	if err != nil {
		t.Fatal(err)
	}
	var want []imports.Item
	wantSum, err := offLocal.Import(context.Background(), ImportRequest{Paths: paths, Org: offOrg.ID, Jobs: 4,
		Progress: func(it imports.Item, _ *imports.Summary) { want = append(want, it) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) < 12 {
		t.Fatalf("%d inputs read by the server, %d offline (want at least 12)", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || (g.Err == nil) != (w.Err == nil) {
			t.Errorf("input %d: %q (error %v), offline %q (error %v)", i, g.Name, g.Err, w.Name, w.Err)
			continue
		}
		if w.Err != nil {
			if !strings.Contains(g.Err.Error(), "no such file") {
				t.Errorf("input %d: error %v, offline %v", i, g.Err, w.Err)
			}
			continue
		}
		if g.Result.Quarantined != "" {
			g.Result.Quarantined = "q"
			w.Result.Quarantined = "q"
		}
		for k := range g.Result.Reports {
			g.Result.Reports[k].ReportID = ""
		}
		for k := range w.Result.Reports {
			w.Result.Reports[k].ReportID = ""
		}
		if !reflect.DeepEqual(g.Result, w.Result) {
			t.Errorf("input %d %s: %+v, offline %+v", i, g.Name, g.Result, w.Result)
		}
		if files[i] != wantSum.Files {
			t.Errorf("input %d: told %d files, want %d", i, files[i], wantSum.Files)
		}
	}
	for _, s := range []*imports.Summary{sum, wantSum} {
		for i := range s.Quarantine {
			s.Quarantine[i].ID = ""
		}
	}
	if !reflect.DeepEqual(sum, wantSum) {
		t.Errorf("summary\n%+v\noffline\n%+v", sum, wantSum)
	}
	if !strings.HasPrefix(got[3].Name, rel) || got[len(got)-1].Name != paths[2] {
		t.Errorf("inputs named %q and %q, not as %q and %q give them", got[3].Name, got[len(got)-1].Name, rel, paths[2])
	}
	// A path missing here is left to the import that hands files over,
	// which reports it as an offline import does.
	if _, err := c.importRead(context.Background(), ImportRequest{Paths: []string{filepath.Join(dir, "nope.xml"), dir}, Org: org.ID}); !errors.Is(err, errImportRefused) {
		t.Errorf("read of a missing path: %v, want errImportRefused", err)
	}
	if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total != sum.Imported || total < 5 {
		t.Errorf("%d reports stored, the summary says %d", total, sum.Imported)
	}
}

// TestImportRefusedForAnotherUser ensures the server reads no file for a
// client of another user: the read is refused before anything is read,
// and Import hands the files over instead, with the same outcome.
func TestImportRefusedForAnotherUser(t *testing.T) {
	db, local, _ := serveIntake(t)
	org := mustAcmeExample(t, db)
	var log lockedBuffer
	c := serveHandler(t, Handler(local, slog.New(slog.NewTextHandler(&log, nil))))
	uid := serverUID
	serverUID = func() int { return os.Geteuid() + 1 }
	t.Cleanup(func() { serverUID = uid })
	dir := ingesttest.ImportTree(t)
	sum, err := c.importRead(context.Background(), ImportRequest{Paths: []string{dir}, Org: org.ID})
	if !errors.Is(err, errImportRefused) || sum != nil {
		t.Fatalf("read as another user: %+v, %v; want errImportRefused", sum, err)
	}
	if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total != 0 {
		t.Errorf("%d reports stored by a refused read", total)
	}
	sum, err = c.Import(context.Background(), ImportRequest{Paths: []string{dir}, Org: org.ID})
	if err != nil || sum.Imported < 5 || sum.Failed != 0 {
		t.Fatalf("Import as another user: %+v, %v; want the files handed over", sum, err)
	}
	if got := log.String(); !strings.Contains(got, "mode=hand-over") || strings.Contains(got, "mode=read") {
		t.Errorf("the server's log does not show a hand-over alone:\n%s", got)
	}
	if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total != sum.Imported {
		t.Errorf("%d reports stored, the summary says %d", total, sum.Imported)
	}
	// A server without the protocol (from before it) is told apart.
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	old := serveHandler(t, h)
	for _, handOver := range []bool{false, true} {
		if _, err := old.Import(context.Background(), ImportRequest{Paths: []string{dir}, HandOver: handOver}); !errors.Is(err, errOldServer) {
			t.Errorf("Import from an old server, hand-over %v: %v, want errOldServer", handOver, err)
		}
	}
}

// TestImportBadRequests ensures an import the server must not act on is
// refused before the switch, with its kind, and nothing is read: a bad
// body, no paths, paths without their file ids, a relative path, and (a
// conflict, on which the client hands the files over) a path where the
// server finds another file than the client did, as in another mount
// namespace.
func TestImportBadRequests(t *testing.T) {
	_, _, c := serveIntake(t)
	dir := t.TempDir()
	id, err := fileIDOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		hdr  importHeader
		kind error
		want string
	}{
		{"no paths", importHeader{Jobs: 1}, store.ErrInvalid, "want 1 to"},
		{"no file ids", importHeader{Paths: []string{"/tmp"}, Jobs: 1}, store.ErrInvalid, "each with its file id"},
		{"relative path", importHeader{Paths: []string{"reports"}, IDs: []fileID{{1, 2}}, Jobs: 1}, store.ErrInvalid, "not absolute"},
		{"another file at the path", importHeader{Paths: []string{dir}, IDs: []fileID{{id.Dev, id.Ino + 1}}, Jobs: 1}, store.ErrConflict, "does not see the file"},
		{"unknown organization", importHeader{Org: "globex", HandOver: true}, store.ErrNotFound, "organization not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uc, _, err := c.openImport(context.Background(), tc.hdr)
			if err == nil {
				uc.Close()
			}
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %v saying %q", err, tc.kind, tc.want)
			}
		})
	}
	for _, body := range []string{`paths=/tmp`, `{"paths": ["/tmp"], "extra": 1}`} {
		req, _ := http.NewRequest("POST", "http://dmarcd/v1/import", strings.NewReader(body))
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", importProtocol)
		if _, err := c.roundTrip(req); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "want the import as a JSON object") {
			t.Errorf("body %s: %v, want ErrInvalid", body, err)
		}
	}
	req, _ := http.NewRequest("POST", "http://dmarcd/v1/import", strings.NewReader(`{"hand_over": true}`))
	if _, err := c.roundTrip(req); !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "want Upgrade") {
		t.Errorf("without Upgrade: %v, want ErrInvalid", err)
	}
}

// switchFake switches the connection of an import request to the import
// protocol without a look at the request, as a fake server does; nil when
// it cannot.
func switchFake(t *testing.T, w http.ResponseWriter, r *http.Request) net.Conn {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Error(err)
		return nil
	}
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + importProtocol + "\r\n\r\n")
	brw.Flush()
	return conn
}

// fakeImportServer answers an import with lines, then does what end says.
func fakeImportServer(t *testing.T, lines []string, end func(net.Conn)) *Client {
	t.Helper()
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	h.HandleFunc("POST /v1/import", func(w http.ResponseWriter, r *http.Request) {
		conn := switchFake(t, w, r)
		if conn == nil {
			return
		}
		defer conn.Close()
		for _, l := range lines {
			fmt.Fprintln(conn, l)
		}
		end(conn)
	})
	return serveHandler(t, h)
}

// TestImportServerGone ensures a server that goes away mid-import leaves
// the client with what it was told (two inputs imported) and an
// *imports.StoppedError of ErrServerGone, not a failure per input.
func TestImportServerGone(t *testing.T) {
	dir := t.TempDir()
	item := `{"item":{"name":%q,"result":{"reports":[{"kind":"aggregate","report_id":"x","domain":"example.com","duplicate":false,"records":5}]}},"files":3,"files_done":%d}`
	c := fakeImportServer(t, []string{fmt.Sprintf(item, dir+"/1.xml", 1), fmt.Sprintf(item, dir+"/2.xml", 2)}, func(net.Conn) {})
	var shown []string
	sum, err := c.Import(context.Background(), ImportRequest{Paths: []string{dir}, Jobs: 4, Progress: func(it imports.Item, _ *imports.Summary) { shown = append(shown, it.Name) }})
	var stopped *imports.StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, ErrServerGone) {
		t.Fatalf("error %v, want a StoppedError of ErrServerGone", err)
	}
	if sum == nil || sum.Inputs != 2 || sum.Imported != 2 || sum.Records != 10 || sum.Files != 3 || sum.FilesDone != 2 || sum.Failures == nil {
		t.Errorf("summary %+v, want the two inputs told", sum)
	}
	if !reflect.DeepEqual(shown, []string{dir + "/1.xml", dir + "/2.xml"}) {
		t.Errorf("progress of %v", shown)
	}
}

// TestImportCancelled ensures cancelling the client's context ends an
// import at once with what was done and ctx's error, in either mode, and
// that the server stops starting inputs when the client goes: with one
// input in flight, far fewer than all files are stored, and its log line
// says stopped.
func TestImportCancelled(t *testing.T) {
	for _, mode := range []string{"read", "hand-over"} {
		t.Run(mode, func(t *testing.T) {
			db := storeForImport(t)
			org := mustAcmeExample(t, db.db)
			paths := writeReportFiles(t, 300, 2)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := 0
			sum, err := db.c.Import(ctx, ImportRequest{Paths: []string{filepath.Dir(paths[0])}, Org: org.ID, Jobs: 1, HandOver: mode == "hand-over",
				Progress: func(imports.Item, *imports.Summary) {
					if n++; n == 2 {
						cancel()
					}
				}})
			if !errors.Is(err, context.Canceled) || sum == nil || sum.Inputs < 2 || sum.Inputs >= len(paths) {
				t.Fatalf("cancelled import: %+v, %v", sum, err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(db.log.String(), "mode="+mode) || !strings.Contains(db.log.String(), "stopped=true") {
				if time.Now().After(deadline) {
					t.Fatalf("the server did not stop the import:\n%s", db.log.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, total, _ := db.db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total >= len(paths)/2 {
				t.Errorf("%d of %d reports stored after the client went", total, len(paths))
			}
		})
	}
}

// TestImportLogsStoppedOnlyWhenStopped ensures the server's "admin
// import" line says stopped=false for an import that finished, in either
// mode, although its client closes the connection (which cancels the
// import's context) as soon as it has the summary.
func TestImportLogsStoppedOnlyWhenStopped(t *testing.T) {
	for _, mode := range []string{"read", "hand-over"} {
		t.Run(mode, func(t *testing.T) {
			env := storeForImport(t)
			org := mustAcmeExample(t, env.db)
			paths := writeReportFiles(t, 3, 2)
			sum, err := env.c.Import(context.Background(), ImportRequest{Paths: paths, Org: org.ID, Jobs: 2, HandOver: mode == "hand-over"})
			if err != nil || sum.Imported != 3 {
				t.Fatalf("import: %+v, %v", sum, err)
			}
			waitForLog(t, env.log, "mode="+mode)
			if line := env.log.String(); !strings.Contains(line, "stopped=false") || strings.Contains(line, "stopped=true") {
				t.Errorf("a finished import logged as stopped:\n%s", line)
			}
		})
	}
}

// waitForLog waits up to 10 seconds for the server's log to hold want.
func waitForLog(t *testing.T, log *lockedBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's log does not say %q:\n%s", want, log.String())
		}
	}
}

type importEnv struct {
	db  *store.DB
	c   *Client
	log *lockedBuffer
}

// storeForImport is serveIntake with the server's log kept.
func storeForImport(t *testing.T) importEnv {
	t.Helper()
	db, local, _ := serveIntake(t)
	var log lockedBuffer
	c := serveHandler(t, Handler(local, slog.New(slog.NewTextHandler(&log, nil))))
	return importEnv{db: db, c: c, log: &log}
}

// TestMapImportName ensures inputs are named under the paths as given:
// relative, with a trailing slash, the root folder, a file itself, mbox
// messages, the longest of nested roots, and a name under none as it is.
func TestMapImportName(t *testing.T) {
	roots := []importRoot{
		{given: "reports/", abs: "/home/u/reports"},
		{given: "./x.mbox", abs: "/home/u/x.mbox"},
		{given: "reports/2024", abs: "/home/u/reports/2024"},
		{given: "/", abs: "/"},
	}
	for name, want := range map[string]string{
		"/home/u/reports/a.xml":          "reports/a.xml",
		"/home/u/reports/sub/b.xml.gz":   "reports/sub/b.xml.gz",
		"/home/u/reports/m.mbox#3":       "reports/m.mbox#3",
		"/home/u/x.mbox#2":               "./x.mbox#2",
		"/home/u/x.mbox":                 "./x.mbox",
		"/home/u/reports/2024/c.zip":     "reports/2024/c.zip",
		"/home/u/reportsX/d.xml":         "/home/u/reportsX/d.xml",
		"/srv/e.xml":                     "/srv/e.xml",
		"/home/u/reports":                "reports/",
		"/home/u/reports/2024x/f.xml":    "reports/2024x/f.xml",
		"/home/u/reports/2024/sub/g.xml": "reports/2024/sub/g.xml",
	} {
		if got := mapImportName(name, roots, -1); got != want {
			t.Errorf("mapImportName(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestImportManyPaths ensures a request larger than any read buffer (1,500
// files named one by one, 150 KB of paths and ids) is read whole.
func TestImportManyPaths(t *testing.T) {
	db, _, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("reports-of-a-long-folder-name-", 2))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range 1500 {
		p := filepath.Join(long, fmt.Sprintf("not-a-report-%04d.txt", i))
		if err := os.WriteFile(p, []byte("nothing here\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sum, err := c.importRead(context.Background(), ImportRequest{Paths: paths, Org: org.ID, Jobs: 64})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != len(paths) || sum.Inputs != len(paths) || sum.Quarantined != len(paths) || sum.Quarantine[7].File != paths[7] {
		t.Errorf("summary: %d files, %d inputs, %d quarantined (first %+v), want %d each",
			sum.Files, sum.Inputs, sum.Quarantined, sum.Quarantine[:1], len(paths))
	}
}
