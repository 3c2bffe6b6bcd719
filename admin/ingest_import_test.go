package admin

import (
	"context"
	"encoding/json"
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

	"github.com/dmarcd/dmarcd/ingest"
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
	sum, err := c.Import(context.Background(), org.ID, paths, 4, func(it imports.Item, s *imports.Summary) {
		got = append(got, it)
		files = append(files, s.Files)
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []imports.Item
	wantSum, err := imports.Run(context.Background(), paths, imports.Options{Jobs: 4,
		Progress: func(it imports.Item, _ *imports.Summary) { want = append(want, it) },
		Ingest: func(ctx context.Context, r io.Reader, d ingest.Arrival) (*ingest.Result, error) {
			return offLocal.Ingest(ctx, r, d.Name, offOrg.ID)
		}})
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
	// A path missing here is left to the import that sends files, which
	// reports it as an offline import does.
	if _, err := c.Import(context.Background(), org.ID, []string{filepath.Join(dir, "nope.xml"), dir}, 4, nil); !errors.Is(err, ErrImportRefused) {
		t.Errorf("Import of a missing path: %v, want ErrImportRefused", err)
	}
	if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total != sum.Imported || total < 5 {
		t.Errorf("%d reports stored, the summary says %d", total, sum.Imported)
	}
}

// TestImportRefusedForAnotherUser ensures the server reads no file for a
// client of another user: the import is refused before anything is read,
// and the client is told to send the files itself.
func TestImportRefusedForAnotherUser(t *testing.T) {
	db, _, c := serveIntake(t)
	org := mustAcmeExample(t, db)
	uid := serverUID
	serverUID = func() int { return os.Geteuid() + 1 }
	t.Cleanup(func() { serverUID = uid })
	dir := ingesttest.ImportTree(t)
	sum, err := c.Import(context.Background(), org.ID, []string{dir}, 4, nil)
	if !errors.Is(err, ErrImportRefused) || sum != nil {
		t.Fatalf("Import as another user: %+v, %v; want ErrImportRefused", sum, err)
	}
	if _, total, _ := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total != 0 {
		t.Errorf("%d reports stored by a refused import", total)
	}
	// A server without the route (from before) is refused the same way.
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	old := serveHandler(t, h)
	if _, err := old.Import(context.Background(), "", []string{dir}, 4, nil); !errors.Is(err, ErrImportRefused) {
		t.Errorf("Import from an old server: %v, want ErrImportRefused", err)
	}
}

// TestImportBadRequests ensures a request the server must not act on gets
// an error line and nothing is read: no paths, paths without their file
// ids, a relative path, not JSON, and (a conflict, on which the client
// sends the files itself) a path where the server finds another file than
// the client did, as in another mount namespace.
func TestImportBadRequests(t *testing.T) {
	_, _, c := serveIntake(t)
	dir := t.TempDir()
	id, err := fileIDOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, line, want string }{
		{"no paths", `{"paths": [], "jobs": 1}`, "want 1 to"},
		{"no file ids", `{"paths": ["/tmp"], "jobs": 1}`, "each with its file id"},
		{"relative path", `{"paths": ["reports"], "ids": [{"dev": 1, "ino": 2}], "jobs": 1}`, "not absolute"},
		{"not JSON", `paths=/tmp`, "one JSON line"},
		{"another file at the path", `{"paths": ["` + dir + `"], "ids": [{"dev": ` + fmt.Sprint(id.Dev) + `, "ino": ` + fmt.Sprint(id.Ino+1) + `}], "jobs": 1}`, "does not see the file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uc, br, err := c.upgrade(context.Background(), "/v1/ingest/import", "", importProtocol)
			if err != nil {
				t.Fatal(err)
			}
			defer uc.Close()
			if _, err := uc.Write([]byte(tc.line + "\n")); err != nil {
				t.Fatal(err)
			}
			var ln importLine
			if err := json.NewDecoder(br).Decode(&ln); err != nil {
				t.Fatal(err)
			}
			kind := "invalid"
			if strings.HasPrefix(tc.name, "another") {
				kind = "conflict"
			}
			if ln.Error == nil || ln.Error.Kind != kind || !strings.Contains(ln.Error.Message, tc.want) || ln.Item != nil || ln.Summary != nil {
				t.Errorf("answer %+v, want a %s error saying %q", ln, kind, tc.want)
			}
		})
	}
}

// fakeImportServer answers an import with lines, then does what end says.
func fakeImportServer(t *testing.T, lines []string, end func(net.Conn)) *Client {
	t.Helper()
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/ping", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]bool{"ok": true}) })
	h.HandleFunc("POST /v1/ingest/import", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + importProtocol + "\r\n\r\n")
		brw.Flush()
		if _, err := brw.ReadString('\n'); err != nil {
			t.Error(err)
			return
		}
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
	sum, err := c.Import(context.Background(), "", []string{dir}, 4, func(it imports.Item, _ *imports.Summary) { shown = append(shown, it.Name) })
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
// import at once with what was done and ctx's error, and that the server
// stops starting inputs when the client goes: with one input in flight,
// far fewer than all files are stored, and its log line says stopped.
func TestImportCancelled(t *testing.T) {
	db := storeForImport(t)
	org := mustAcmeExample(t, db.db)
	paths := writeReportFiles(t, 300, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	sum, err := db.c.Import(ctx, org.ID, []string{filepath.Dir(paths[0])}, 1, func(imports.Item, *imports.Summary) {
		if n++; n == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || sum == nil || sum.Inputs < 2 || sum.Inputs >= len(paths) {
		t.Fatalf("cancelled import: %+v, %v", sum, err)
	}
	waitForLog(t, db.log, "stopped=true")
	if _, total, _ := db.db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1}}); total >= len(paths)/2 {
		t.Errorf("%d of %d reports stored after the client went", total, len(paths))
	}
}

// TestImportLogsStoppedOnlyWhenStopped ensures the server's "admin
// import" line says stopped=true only for an import that was stopped, not
// for one that finished and whose client closed the connection (as every
// client does once it has the summary) before the line was written.
func TestImportLogsStoppedOnlyWhenStopped(t *testing.T) {
	env := storeForImport(t)
	org := mustAcmeExample(t, env.db)
	paths := writeReportFiles(t, 3, 2)
	hook := importSummarySent
	t.Cleanup(func() { importSummarySent = hook })
	// The client gets the summary and goes before the server logs.
	importSummarySent = func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
	sum, err := env.c.Import(context.Background(), org.ID, paths, 2, nil)
	if err != nil || sum.Imported != 3 {
		t.Fatalf("import: %+v, %v", sum, err)
	}
	waitForLog(t, env.log, "admin import")
	if line := env.log.String(); !strings.Contains(line, "stopped=false") {
		t.Errorf("a finished import logged as stopped:\n%s", line)
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
	sum, err := c.Import(context.Background(), org.ID, paths, 64, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != len(paths) || sum.Inputs != len(paths) || sum.Quarantined != len(paths) || sum.Quarantine[7].File != paths[7] {
		t.Errorf("summary: %d files, %d inputs, %d quarantined (first %+v), want %d each",
			sum.Files, sum.Inputs, sum.Quarantined, sum.Quarantine[:1], len(paths))
	}
}
