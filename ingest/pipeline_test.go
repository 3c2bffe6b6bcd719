package ingest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// crashChildEnv names the database file the crash child writes to.
const crashChildEnv = "DMARCD_INGEST_CRASH_CHILD"

// TestKillDuringLargeReport ensures that killing the process (SIGKILL)
// while a large report is written in chunks leaves the file consistent:
// the report committed before is whole, the interrupted one invisible and
// its records deleted when the next pipeline starts, and importing it again
// stores it whole.
func TestKillDuringLargeReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "chunks committed\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("child said %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if n := countKeys(t, db, "reports_pending"); n != 1 {
		t.Fatalf("%d pending reports after the kill, want 1 (the crash did not hit mid-report)", n)
	}
	if n, orphans := storedRecords(t, db); n != 10 || orphans == 0 {
		t.Fatalf("%d records, %d orphan blocks after the kill; want 10 and chunks of the large report", n, orphans)
	}
	p := startPipeline(t, db, nil) // New discards the leftovers
	if err := db.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	for b, want := range map[string]int{"reports": 1, "reports_pending": 0, "reports_by_domain": 1} {
		if n := countKeys(t, db, b); n != want {
			t.Errorf("bucket %s: %d keys, want %d", b, n, want)
		}
	}
	if n, orphans := storedRecords(t, db); n != 10 || orphans != 0 {
		t.Errorf("%d records, %d orphan blocks after the restart; want 10 and none", n, orphans)
	}
	orgs, _ := db.ListOrganizations()
	res, err := p.Ingest(context.Background(), bytes.NewReader(reportgen.Generate(2, 3000, reportgen.Options{})), importOf("large.xml"))
	if err != nil || len(res.Reports) != 1 || res.Reports[0].Duplicate || res.Reports[0].Records != 3000 {
		t.Fatalf("import again: %+v, %v", res, err)
	}
	if recs := allRecords(t, db, orgs[0].ID, res.Reports[0].ReportID); len(recs) != 3000 {
		t.Errorf("%d records, want 3000", len(recs))
	}
}

// TestCrashChild is the process TestKillDuringLargeReport kills: it stores
// a small report, then streams a large one whose second half never comes,
// and says so once some of its chunks are committed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("run by TestKillDuringLargeReport")
	}
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	org := storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)
	storetest.MustDomain(t, db, org.ID, "example.com")
	p, err := New(Config{Store: db, BatchRecords: 200})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.Run(context.Background()) }()
	if _, err := p.Ingest(context.Background(), bytes.NewReader(reportgen.Generate(1, 10, reportgen.Options{})), importOf("small.xml")); err != nil {
		t.Fatal(err)
	}
	xml := reportgen.Generate(2, 3000, reportgen.Options{})
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write(xml[:len(xml)/2]) }() // and nothing more: the kill comes first
	go func() { _, _ = p.Ingest(context.Background(), pr, importOf("large.xml")) }()
	for p.commits.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("chunks committed")
	time.Sleep(time.Hour) // until killed
}

// TestImportGroupWaitsLonger ensures that a group of imports waits up to
// ImportBatchDelay for an import still parsing, while a group that a mail
// joins commits within BatchDelay: a sender waits on its acknowledgement.
func TestImportGroupWaitsLonger(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BatchDelay, c.ImportBatchDelay = 10*time.Millisecond, time.Hour })
	dom := storetest.MustDomain(t, e.db, e.org.ID, "example.com")
	// An import that stays parsing until its pipe is closed.
	pr, pw := io.Pipe()
	slow := make(chan error, 1)
	go func() {
		_, err := e.p.Ingest(context.Background(), pr, importOf("slow.xml"))
		slow <- err
	}()
	xml := reportgen.Generate(1, 5, reportgen.Options{})
	if _, err := pw.Write(xml[:len(xml)/2]); err != nil {
		t.Fatal(err)
	}
	ingest := func(seed int64, d Arrival) <-chan error {
		done := make(chan error, 1)
		go func() {
			res, err := e.p.Ingest(context.Background(), bytes.NewReader(reportgen.Generate(seed, 5, reportgen.Options{})), d)
			if err == nil && (len(res.Reports) != 1 || res.Reports[0].Duplicate) {
				err = fmt.Errorf("result %+v", res)
			}
			done <- err
		}()
		return done
	}

	// A mail beside the parsing import is acknowledged at once.
	select {
	case err := <-ingest(2, smtpTo(dom.ReportingEmail)):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a mail waited for an import's group")
	}

	// An import waits for the other one to finish parsing...
	imp := ingest(3, importOf("b.xml"))
	select {
	case err := <-imp:
		t.Fatalf("an import did not wait for the other import's parse (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	// ...unless a mail joins its group: then both commit within BatchDelay.
	select {
	case err := <-ingest(4, smtpTo(dom.ReportingEmail)):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a mail waited for the import's group")
	}
	if err := <-imp; err != nil {
		t.Fatal(err)
	}
	// The import still parsing commits once its input ends.
	imp = ingest(5, importOf("c.xml"))
	time.Sleep(50 * time.Millisecond)
	if _, err := pw.Write(xml[len(xml)/2:]); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	for _, ch := range []<-chan error{slow, imp} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the group did not commit once nobody was parsing")
		}
	}
}
