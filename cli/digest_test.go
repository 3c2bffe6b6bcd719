package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/numfmt"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// digestDataDir is newDataDir (organization acme, its domain
// example.com) with a report for each of the last 10 UTC days; it returns
// the day digest's figures of example.com as the statistics have them.
func digestDataDir(t *testing.T) (dataDir, wantLine string) {
	t.Helper()
	dataDir = newDataDir(t)
	db, err := (&globalOptions{DataDir: dataDir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org, err := db.FindOrganization("acme") // newDataDir's, with example.com
	if err != nil {
		t.Fatal(err)
	}
	refs, err := db.DomainsNamed(org.ID, "example.com")
	if err != nil || len(refs) != 1 {
		t.Fatalf("example.com: %v %v", refs, err)
	}
	dom := refs[0]
	p, stop := ingesttest.Start(t, ingest.Config{Store: db})
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for i := range 10 {
		xml := reportgen.Generate(int64(i+1), 40, reportgen.Options{Domain: "example.com", ReportID: fmt.Sprint("r", i), Begin: today.AddDate(0, 0, -i)})
		if _, err := p.Ingest(context.Background(), bytes.NewReader(xml), ingest.Arrival{Source: ingest.SourceImport, OrgID: org.ID, Name: "r.xml"}); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	y := today.AddDate(0, 0, -1)
	st, err := db.DomainStatistics(org.ID, dom.ID, y, y)
	if err != nil || st.MessageCount == 0 {
		t.Fatalf("statistics of yesterday: %v, %+v", err, st)
	}
	return dataDir, fmt.Sprintf("example.com: %s messages", numfmt.Count(st.MessageCount)) + "|DMARC pass " + numfmt.Percent(st.DMARC.PassRate)
}

func checkDigestText(t *testing.T, out, want string) {
	t.Helper()
	prefix, rate, _ := strings.Cut(want, "|")
	if !strings.HasPrefix(out, "Daily DMARC digest for acme: ") {
		t.Errorf("no subject line:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, rate) {
			return
		}
	}
	t.Errorf("no line %q with %q:\n%s", prefix, rate, out)
}

// TestDigestPreview runs 'dmarcd digest preview' on the database file,
// then through a running server's admin socket (the test holds the file,
// so the command cannot fall back to it): the text part, the HTML, and
// --send-to, which queues the digest in the outbox.
func TestDigestPreview(t *testing.T) {
	dataDir, want := digestDataDir(t)
	dd := "--data-dir=" + dataDir
	code, out, errOut := run(t, nil, dd, "digest", "preview", "--org", "acme", "--dns-server", "127.0.0.1:1")
	if code != 0 {
		t.Fatalf("offline: exit %d\n%s%s", code, out, errOut)
	}
	checkDigestText(t, out, want)
	if code, _, errOut := run(t, nil, dd, "digest", "preview", "--org", "acme", "--period", "month"); code != 2 || !strings.Contains(errOut, "--period") {
		t.Errorf("--period month: exit %d %s", code, errOut)
	}
	if code, _, errOut := run(t, nil, dd, "digest", "preview", "--org", "nobody"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown organization: exit %d %s", code, errOut)
	}

	g := &globalOptions{DataDir: dataDir}
	db, err := g.openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ln, err := admin.Listen(g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: admin.Handler(&admin.Local{DB: db}, slog.New(slog.DiscardHandler))}
	go hs.Serve(ln)
	defer hs.Close()
	if code, out, errOut = run(t, nil, dd, "digest", "preview", "--org", "acme"); code != 0 {
		t.Fatalf("through the socket: exit %d\n%s%s", code, out, errOut)
	}
	checkDigestText(t, out, want)
	if code, out, errOut = run(t, nil, dd, "digest", "preview", "--org", "acme", "--period", "week", "--html"); code != 0 ||
		!strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.Contains(out, "Weekly DMARC digest") {
		t.Errorf("--html: exit %d\n%.300s%s", code, out, errOut)
	}
	if code, out, errOut = run(t, nil, dd, "digest", "preview", "--org", "acme", "--send-to", "ops@example.net"); code != 0 || !strings.Contains(out, "Queued the day digest to ops@example.net") {
		t.Fatalf("--send-to: exit %d\n%s%s", code, out, errOut)
	}
	log, err := db.MailLog("", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].Kind != store.MailKindDigest || log[0].To != "ops@example.net" || !strings.HasPrefix(log[0].Subject, "Daily DMARC digest for acme") {
		t.Errorf("mail log %+v", log)
	}
	if code, _, errOut = run(t, nil, dd, "digest", "preview", "--org", "acme", "--send-to", "not an address"); code != 1 || !strings.Contains(errOut, "address") {
		t.Errorf("bad --send-to: exit %d %s", code, errOut)
	}
}
