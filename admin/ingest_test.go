package admin

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// serveIntake serves a Local with a running pipeline over a real socket.
func serveIntake(t *testing.T) (*store.DB, *Local, *Client) {
	t.Helper()
	db := storetest.Open(t)
	p, err := ingest.New(ingest.Config{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	local := &Local{DB: db, Pipeline: p}
	path := filepath.Join(t.TempDir(), "dmarcd.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(local, slog.New(slog.DiscardHandler))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return db, local, c
}

// TestIntakeOverSocket ensures import and the quarantine operations give
// the same answers over the socket as in process, errors keeping their
// kind: a report is stored, an unroutable one quarantined and, once its
// domain exists, retried into a report.
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

	for _, svc := range []Service{c, local} {
		_, err := svc.Ingest(ctx, bytes.NewReader(nil), "x.xml", "no-such-org")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%T: unknown organization: %v, want ErrNotFound", svc, err)
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

	xml := reportgen.Generate(1, 7, reportgen.Options{Domain: "example.com"})
	res, err := c.Ingest(ctx, bytes.NewReader(xml), "/tmp/a.xml", "ACME")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reports) != 1 || res.Reports[0].Records != 7 || res.Reports[0].Duplicate {
		t.Fatalf("ingest over socket: %+v", res)
	}

	other := reportgen.Generate(2, 4, reportgen.Options{Domain: "later.example"})
	res, err = c.Ingest(ctx, bytes.NewReader(other), "/tmp/b.xml", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined == "" || len(res.Reports) != 0 {
		t.Fatalf("report for an unregistered domain: %+v, want quarantined", res)
	}
	id := res.Quarantined
	entries, total, err := c.ListQuarantine(ctx, store.Page{Page: 1, Limit: 10})
	if err != nil || total != 1 || len(entries) != 1 || entries[0].ID != id || entries[0].Name != "/tmp/b.xml" {
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

	res, err = c.Ingest(ctx, bytes.NewReader([]byte("junk")), "/tmp/c.txt", "")
	if err != nil || res.Quarantined == "" {
		t.Fatalf("junk: %v %+v", err, res)
	}
	if err := c.DeleteQuarantine(ctx, res.Quarantined); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := local.ListQuarantine(ctx, store.Page{Page: 1, Limit: 10}); total != 0 {
		t.Errorf("%d entries left after delete", total)
	}
}

// TestLocalWithoutPipeline ensures intake operations on a Local built
// without a pipeline fail instead of panicking.
func TestLocalWithoutPipeline(t *testing.T) {
	l := &Local{DB: storetest.Open(t)}
	if _, err := l.Ingest(context.Background(), bytes.NewReader(nil), "x", ""); !errors.Is(err, errNoPipeline) {
		t.Errorf("Ingest: %v", err)
	}
	if _, err := l.RetryQuarantine(context.Background(), "x"); !errors.Is(err, errNoPipeline) {
		t.Errorf("RetryQuarantine: %v", err)
	}
}
