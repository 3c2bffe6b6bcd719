package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// serveIntake serves a Local with a running pipeline over a real socket.
func serveIntake(t *testing.T) (*store.DB, *Local, *Client) {
	t.Helper()
	env := ingesttest.New(t)
	local := &Local{DB: env.DB, Pipeline: env.Pipeline}
	return env.DB, local, serveHandler(t, Handler(local, slog.New(slog.DiscardHandler)))
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

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeReportFiles writes n report files of records records each, cycling
// xml, gz and zip, and returns their paths.
func writeReportFiles(t *testing.T, n, records int) []string {
	t.Helper()
	dir := t.TempDir()
	begin := time.Now().Add(-48 * time.Hour).UTC().Truncate(24 * time.Hour)
	var paths []string
	for i := range n {
		xml := reportgen.Generate(int64(i), records, reportgen.Options{Begin: begin})
		name, data := fmt.Sprintf("r%d.xml", i), xml
		switch i % 3 {
		case 1:
			name, data = name+".gz", reportgen.Gzip(xml)
		case 2:
			name, data = fmt.Sprintf("r%d.zip", i), reportgen.Zip(name, xml)
		}
		paths = append(paths, writeFile(t, dir, name, data))
	}
	return paths
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

// TestIntakeOverSocket ensures import and the quarantine operations give
// the same answers over the socket, in either mode, as in process, errors
// keeping their kind: a report is stored, an unroutable one quarantined
// under its absolute path and, once its domain exists, retried into a
// report.
func TestIntakeOverSocket(t *testing.T) {
	db, local, c := serveIntake(t)
	ctx := context.Background()
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	addDomain := func(name, local string) {
		t.Helper()
		if err := db.CreateDomain(&store.Domain{OrgID: org.ID, Name: name, ReportingEmail: local + "@reports.test", DMARCRecord: "v=DMARC1; p=none"}); err != nil {
			t.Fatal(err)
		}
	}
	addDomain("example.com", "abc")
	dir := t.TempDir()
	junk := writeFile(t, dir, "c.txt", []byte("junk"))

	for _, svc := range []Service{c, local} {
		for _, handOver := range []bool{false, true} {
			_, err := svc.Import(ctx, ImportRequest{Paths: []string{junk}, Org: "no-such-org", HandOver: handOver})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%T, hand-over %v: unknown organization: %v, want ErrNotFound", svc, handOver, err)
			}
		}
		if _, err := svc.FindQuarantine(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%T: unknown entry: %v, want ErrNotFound", svc, err)
		}
		if _, err := svc.QuarantineRaw(ctx, "nope", &bytes.Buffer{}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%T: raw of unknown entry: %v, want ErrNotFound", svc, err)
		}
		if err := svc.DeleteQuarantine(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%T: delete unknown entry: %v, want ErrNotFound", svc, err)
		}
		if _, _, err := svc.ListQuarantine(ctx, store.Page{}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%T: page 0: %v, want ErrInvalid", svc, err)
		}
	}

	one := func(svc Service, path, org string, handOver bool) *ingest.Result {
		t.Helper()
		var items []imports.Item
		sum, err := svc.Import(ctx, ImportRequest{Paths: []string{path}, Org: org, HandOver: handOver,
			Progress: func(it imports.Item, _ *imports.Summary) { items = append(items, it) }})
		if err != nil || sum.Inputs != 1 || len(items) != 1 || items[0].Err != nil || items[0].Name != path {
			t.Fatalf("%T: import of %s: %+v %+v %v", svc, path, sum, items, err)
		}
		return items[0].Result
	}
	for i, handOver := range []bool{false, true} {
		xml := reportgen.Generate(int64(1+i), 7, reportgen.Options{Domain: "example.com"})
		res := one(c, writeFile(t, dir, fmt.Sprintf("a%d.xml", i), xml), "ACME", handOver)
		if len(res.Reports) != 1 || res.Reports[0].Records != 7 || res.Reports[0].Duplicate {
			t.Fatalf("hand-over %v: import over socket: %+v", handOver, res)
		}
	}

	other := reportgen.Generate(2, 4, reportgen.Options{Domain: "later.example"})
	otherPath := writeFile(t, dir, "b.xml", other)
	res := one(c, otherPath, "", true)
	if res.Quarantined == "" || len(res.Reports) != 0 {
		t.Fatalf("report for an unregistered domain: %+v, want quarantined", res)
	}
	id := res.Quarantined
	entries, total, err := c.ListQuarantine(ctx, store.Page{Page: 1, Limit: 10})
	if err != nil || total != 1 || len(entries) != 1 || entries[0].ID != id || entries[0].Name != otherPath {
		t.Fatalf("list: %v %d %+v", err, total, entries)
	}
	e, err := c.FindQuarantine(ctx, id)
	if err != nil || e.Size != int64(len(other)) {
		t.Fatalf("find: %v %+v", err, e)
	}
	var raw bytes.Buffer
	if _, err := c.QuarantineRaw(ctx, id, &raw); err != nil || !bytes.Equal(raw.Bytes(), other) {
		t.Fatalf("raw: %v, %d bytes, want the %d bytes sent", err, raw.Len(), len(other))
	}

	addDomain("later.example", "def")
	res, err = c.RetryQuarantine(ctx, id)
	if err != nil || len(res.Reports) != 1 || res.Quarantined != "" {
		t.Fatalf("retry: %v %+v", err, res)
	}
	if _, err := c.FindQuarantine(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("entry still there after a successful retry: %v", err)
	}

	res = one(local, junk, "", false)
	if res.Quarantined == "" {
		t.Fatalf("junk: %+v", res)
	}
	if err := c.DeleteQuarantine(ctx, res.Quarantined); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := local.ListQuarantine(ctx, store.Page{Page: 1, Limit: 10}); total != 0 {
		t.Errorf("%d entries left after delete", total)
	}
}

// TestLocalWithoutPipeline ensures intake operations on a Local built
// without a pipeline fail instead of panicking, in process and over the
// socket.
func TestLocalWithoutPipeline(t *testing.T) {
	l := &Local{DB: storetest.Open(t)}
	path := writeFile(t, t.TempDir(), "x.xml", []byte("x"))
	if _, err := l.Import(context.Background(), ImportRequest{Paths: []string{path}}); !errors.Is(err, errNoPipeline) {
		t.Errorf("Import: %v", err)
	}
	if _, err := l.RetryQuarantine(context.Background(), "x"); !errors.Is(err, errNoPipeline) {
		t.Errorf("RetryQuarantine: %v", err)
	}
	c := serveHandler(t, Handler(l, slog.New(slog.DiscardHandler)))
	for _, handOver := range []bool{false, true} {
		if _, err := c.Import(context.Background(), ImportRequest{Paths: []string{path}, HandOver: handOver}); err == nil || !strings.Contains(err.Error(), errNoPipeline.Error()) {
			t.Errorf("Import over the socket, hand-over %v: %v", handOver, err)
		}
	}
}
