package imports

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// importTree writes a folder of every kind of input and returns it.
func importTree(t *testing.T) string { return ingesttest.ImportTree(t) }

// TestImportFolder ensures a folder import walks files, mbox messages and
// odd names, counts each outcome, lists failures and quarantined inputs in
// input order, reports progress for every input, and can be re-run.
func TestImportFolder(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := importTree(t)
	// A failure report (reported domain example.com) is counted apart.
	failure, err := os.ReadFile(filepath.Join("..", "..", "testdata", "corpus", "failure", "dmarc_ruf_report_linkedin.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ruf.eml"), failure, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.xml")
	var items []Item
	var last Summary
	sum, err := Run(context.Background(), []string{missing, dir}, Options{
		Ingest: env.Pipeline.Ingest,
		Jobs:   3,
		Progress: func(it Item, s *Summary) {
			items = append(items, it)
			last = *s
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Summary{Files: 7, Inputs: 10, FilesDone: 7, Imported: 5, Records: 25, FailureReports: 1, Duplicates: 0, Quarantined: 3, Failed: 1}
	got := *sum
	got.Quarantine, got.Failures, got.ExpiredReports, got.Skipped = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("summary %+v\nwant    %+v", got, want)
	}
	if len(items) != sum.Inputs || last.FilesDone != sum.Files {
		t.Errorf("progress: %d calls, last at %d/%d files; want %d calls", len(items), last.FilesDone, last.Files, sum.Inputs)
	}
	if len(sum.Failures) != 1 || sum.Failures[0].File != missing || !strings.Contains(sum.Failures[0].Reason, "no such file") {
		t.Errorf("failures = %+v", sum.Failures)
	}
	var qFiles []string
	for _, q := range sum.Quarantine {
		if q.ID == "" || q.Reason == "" {
			t.Errorf("quarantined without id or reason: %+v", q)
		}
		qFiles = append(qFiles, strings.TrimPrefix(q.File, dir+"/"))
	}
	if strings.Join(qFiles, ",") != "inbox.mbox#2,notes.txt,other.xml" {
		t.Errorf("quarantined %v, want in input order", qFiles)
	}
	if n := len(env.Reports(t, "abc@reports.test")); n != 5 {
		t.Errorf("%d reports stored, want 5", n)
	}
	entries := env.Quarantine(t)
	for _, e := range entries {
		if !filepath.IsAbs(e.Name) || e.Source != "import" {
			t.Errorf("quarantine entry %q from %s, want an absolute path from import", e.Name, e.Source)
		}
	}

	again, err := Run(context.Background(), []string{filepath.Join(dir, "sub dir", "b [1] (x)!=.xml.gz"), dir}, Options{Ingest: env.Pipeline.Ingest})
	if err != nil {
		t.Fatal(err)
	}
	if again.Imported != 0 || again.FailureReports != 0 || again.Duplicates != 7 || again.Failed != 0 {
		t.Errorf("re-run: %+v, want 7 duplicates and nothing new", again)
	}
}

// TestImportCancelled ensures a cancelled import stops, says so, and
// reports what it did.
func TestImportCancelled(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := importTree(t)
	ctx, cancel := context.WithCancel(context.Background())
	sum, err := Run(ctx, []string{dir}, Options{
		Ingest: env.Pipeline.Ingest,
		Jobs:   1,
		Progress: func(Item, *Summary) {
			cancel()
		},
	})
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if sum == nil || sum.Inputs == 0 || sum.Inputs >= 8 {
		t.Errorf("summary after cancel: %+v", sum)
	}
}

// TestImportBadPaths ensures paths that are not files or folders are
// failures with a reason, and the rest is imported.
func TestImportBadPaths(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.xml")
	writeFile(t, good, reportgen.Generate(1, 3, reportgen.Options{Domain: "example.com"}))
	for _, c := range []struct{ path, reason string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{"/dev/null", "not a regular file"},
		{filepath.Join(dir, "*.xml"), "no such file"}, // never expanded
	} {
		sum, err := Run(context.Background(), []string{c.path, good}, Options{Ingest: env.Pipeline.Ingest})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Failed != 1 || len(sum.Failures) != 1 || !strings.Contains(sum.Failures[0].Reason, c.reason) {
			t.Errorf("%s: failures %+v, want one saying %q", c.path, sum.Failures, c.reason)
		}
		if sum.Imported+sum.Duplicates != 1 {
			t.Errorf("%s: the good file was not imported: %+v", c.path, sum)
		}
	}
}

// TestImportTLSReports ensures bare .json and .json.gz TLS reports and a
// TLS report mail are imported and counted as TLS reports, and counted as
// duplicates when imported again.
func TestImportTLSReports(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := t.TempDir()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "dmarc", "tlsrpt", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ms := read("microsoft.json")
	writeFile(t, filepath.Join(dir, "google.json"), read("google.json"))
	writeFile(t, filepath.Join(dir, "microsoft.json.gz"), reportgen.Gzip(ms))
	other := bytes.Replace(ms, []byte(`"133771234567890123+example.com"`), []byte(`"mailed"`), 1)
	writeFile(t, filepath.Join(dir, "tls.eml"), ingesttest.MailWith("tlsrpt@microsoft.com", "abc@reports.test", reportgen.Gzip(other), "application/tlsrpt+gzip", "r.json.gz"))
	o := Options{Ingest: env.Pipeline.Ingest, Jobs: 2}
	sum, err := Run(context.Background(), []string{dir}, o)
	if err != nil {
		t.Fatal(err)
	}
	if sum.TLSReports != 3 || sum.Imported != 0 || sum.Quarantined != 0 || sum.Failed != 0 {
		t.Fatalf("summary %+v", sum)
	}
	again, err := Run(context.Background(), []string{dir}, o)
	if err != nil {
		t.Fatal(err)
	}
	if again.TLSReports != 0 || again.Duplicates != 3 {
		t.Fatalf("again: %+v", again)
	}
}

// TestImportProgressInNameOrder ensures progress lines come in the order
// of the names given (a missing path given last is reported last), and
// folder files in name order, however the inputs in flight finish.
func TestImportProgressInNameOrder(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := importTree(t)
	missing := filepath.Join(dir, "nope.xml")
	first := filepath.Join(dir, "sub dir", "c.zip")
	var got []string
	_, err := Run(context.Background(), []string{first, dir, missing}, Options{
		Ingest: env.Pipeline.Ingest, Jobs: 8,
		Progress: func(it Item, _ *Summary) { got = append(got, it.Name) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{first, filepath.Join(dir, "a.xml"), filepath.Join(dir, "inbox.mbox#1"), filepath.Join(dir, "inbox.mbox#2"),
		filepath.Join(dir, "inbox.mbox#3"), filepath.Join(dir, "notes.txt"), filepath.Join(dir, "other.xml"),
		filepath.Join(dir, "sub dir", "b [1] (x)!=.xml.gz"), filepath.Join(dir, "sub dir", "c.zip"), missing}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("progress order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestImportFilesDoneExact ensures FilesDone counts a file done as soon as
// its last input is: the producer still busy after handing out a file's
// last input (here a delay injected after every hand-out, as a loaded
// machine does) must not leave the progress of that input, nor the
// summary a client builds from the progress, one file short (issue 24:
// TestImportServerReads saw FilesDone 7 for 8 files).
func TestImportFilesDoneExact(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := importTree(t)
	testHookSent = func() { time.Sleep(20 * time.Millisecond) }
	t.Cleanup(func() { testHookSent = nil })
	var calls []Summary
	sum, err := Run(context.Background(), []string{dir}, Options{
		Ingest: env.Pipeline.Ingest, Jobs: 4,
		Progress: func(_ Item, s *Summary) { calls = append(calls, *s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != sum.Inputs || sum.FilesDone != sum.Files {
		t.Fatalf("%d progress calls for %d inputs; summary %d of %d files done", len(calls), sum.Inputs, sum.FilesDone, sum.Files)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].FilesDone < calls[i-1].FilesDone {
			t.Errorf("FilesDone went back from %d to %d", calls[i-1].FilesDone, calls[i].FilesDone)
		}
	}
	if last := calls[len(calls)-1]; last.FilesDone != sum.Files {
		t.Errorf("the last input's progress says %d of %d files done", last.FilesDone, sum.Files)
	}
}

// TestImportDuplicateWithDifferentContent ensures the summary counts a
// report stored before apart when the copy imported differs from it
// (issue 24): "duplicates" are the same report again,
// "different_content" another one under the same reporter, id and domain.
func TestImportDuplicateWithDifferentContent(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := t.TempDir()
	o := reportgen.Options{ReportID: "same-id", Begin: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	writeFile(t, filepath.Join(dir, "a.xml"), reportgen.Generate(1, 5, o))
	if _, err := Run(context.Background(), []string{dir}, Options{Ingest: env.Pipeline.Ingest}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "b.xml"), reportgen.Generate(1, 7, o))
	sum, err := Run(context.Background(), []string{dir}, Options{Ingest: env.Pipeline.Ingest})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Imported != 0 || sum.Duplicates != 1 || sum.DifferentContent != 1 {
		t.Errorf("summary: %d imported, %d duplicates, %d with different content; want 0, 1, 1", sum.Imported, sum.Duplicates, sum.DifferentContent)
	}
}

// TestImportFolderSkipsNonReports ensures a folder import leaves out the
// files whose names say they are no report (a README, a LICENSE, notes in
// Markdown, pictures) with a note, rather than quarantining them, while a
// file named by itself is read whatever its name, and a report under an
// ordinary name is imported.
func TestImportFolderSkipsNonReports(t *testing.T) {
	env := ingesttest.New(t, "acme/example.com/abc")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.xml"), reportgen.Generate(1, 3, reportgen.Options{Domain: "example.com"}))
	skipped := []string{"LICENSE", "README", "README.md", filepath.Join("docs", "CHANGELOG.txt"), filepath.Join("docs", "notes.markdown"),
		filepath.Join("docs", "shot.png"), "readme.rst"}
	for _, name := range skipped {
		writeFile(t, filepath.Join(dir, name), []byte("# not a report\n"))
	}
	sum, err := Run(context.Background(), []string{dir}, Options{Ingest: env.Pipeline.Ingest})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Imported != 1 || sum.Quarantined != 0 || sum.Failed != 0 || sum.Files != 1 || sum.Inputs != 1 {
		t.Errorf("summary %+v, want 1 imported, nothing quarantined, 1 file", sum)
	}
	var got []string
	for _, s := range sum.Skipped {
		if s.Reason == "" {
			t.Errorf("skipped %s without a note", s.File)
		}
		got = append(got, strings.TrimPrefix(s.File, dir+"/"))
	}
	want := []string{"LICENSE", "README", "README.md", "docs/CHANGELOG.txt", "docs/notes.markdown", "docs/shot.png", "readme.rst"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("skipped %v, want %v (in name order)", got, want)
	}
	if q := env.Quarantine(t); len(q) != 0 {
		t.Errorf("%d quarantine entries, want none: %+v", len(q), q[0])
	}

	// Named by itself, a file is read: it is quarantined with its reason.
	readme := filepath.Join(dir, "README.md")
	sum, err = Run(context.Background(), []string{readme}, Options{Ingest: env.Pipeline.Ingest})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Quarantined != 1 || len(sum.Skipped) != 0 {
		t.Errorf("README.md named by itself: %+v, want it read (quarantined)", sum)
	}
}
