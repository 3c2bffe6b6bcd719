// Package ingesttest runs a real ingest pipeline over a real store for the
// tests of the ways in (ingest/smtp, ingest/imports, and their siblings),
// and builds report mails as receivers send them.
package ingesttest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// Env is a real store with registered domains and a running pipeline.
type Env struct {
	DB       *store.DB
	Pipeline *ingest.Pipeline
	// Stop stops the pipeline's Run and waits for it; it may be called
	// more than once and is called when the test ends.
	Stop    func()
	Orgs    map[string]*store.Organization
	Domains map[string]*store.Domain // by reporting address
}

// New registers each domain spec "org/name/local": the domain name in that
// organization with reporting address local@reports.test, and runs a
// pipeline until the test ends.
func New(t testing.TB, specs ...string) *Env {
	t.Helper()
	return NewWith(t, nil, specs...)
}

// NewWith is New with the pipeline's Config changed by tweak first.
func NewWith(t testing.TB, tweak func(*ingest.Config), specs ...string) *Env {
	t.Helper()
	env := &Env{DB: storetest.Open(t), Orgs: map[string]*store.Organization{}, Domains: map[string]*store.Domain{}}
	for _, spec := range specs {
		parts := strings.Split(spec, "/")
		org := env.Orgs[parts[0]]
		if org == nil {
			var err error
			if org, err = env.DB.CreateOrganization(parts[0], store.PlanUnlimited); err != nil {
				t.Fatal(err)
			}
			env.Orgs[parts[0]] = org
		}
		d := &store.Domain{OrgID: org.ID, Name: parts[1], ReportingEmail: parts[2] + "@reports.test", DMARCRecord: "v=DMARC1; p=none"}
		if err := env.DB.CreateDomain(d); err != nil {
			t.Fatal(err)
		}
		env.Domains[d.ReportingEmail] = d
	}
	cfg := ingest.Config{Store: env.DB, Logger: slog.New(slog.DiscardHandler)}
	if tweak != nil {
		tweak(&cfg)
	}
	env.Pipeline, env.Stop = Start(t, cfg)
	return env
}

// Start makes the pipeline of cfg (a nil Logger discards) and runs it
// until stop is called or the test ends; stop waits for Run to return and
// may be called more than once.
func Start(t testing.TB, cfg ingest.Config) (p *ingest.Pipeline, stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := ingest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return p, stop
}

// Reports lists the reports stored for the domain with this address.
func (env *Env) Reports(t testing.TB, addr string) []*store.Report {
	t.Helper()
	d := env.Domains[addr]
	reps, _, err := env.DB.ListReports(d.OrgID, store.ReportFilter{DomainID: d.ID, Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return reps
}

// Quarantine lists the quarantine entries.
func (env *Env) Quarantine(t testing.TB) []*store.QuarantineEntry {
	t.Helper()
	entries, _, err := env.DB.ListQuarantine(store.Page{Page: 1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// ReportMail is a report mail as receivers send it: a gzip attachment.
func ReportMail(from, to string, seed int64, records int, opts reportgen.Options) ([]byte, reportgen.Stats) {
	var xml bytes.Buffer
	stats, _ := reportgen.WriteReport(&xml, seed, records, opts)
	return MailWith(from, to, reportgen.Gzip(xml.Bytes()), "application/gzip", "report.xml.gz"), stats
}

// MailWith is a mail with a text part and one base64 attachment.
func MailWith(from, to string, attachment []byte, ctype, name string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: Report domain: example.com\r\nMIME-Version: 1.0\r\n", from, to)
	b.WriteString("Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nThis is a DMARC aggregate report.\r\n")
	fmt.Fprintf(&b, "--b1\r\nContent-Type: %s; name=\"%s\"\r\nContent-Transfer-Encoding: base64\r\n\r\n", ctype, name)
	enc := base64.StdEncoding.EncodeToString(attachment)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n--b1--\r\n")
	return b.Bytes()
}

// ImportTree writes a folder of every kind of input an import meets and
// returns it: a report of example.com as xml, gz and zip (two in a
// sub-folder with an odd name), hidden files and folders an import
// skips, a README a folder import skips by its name, a file without a report, a report of an unregistered domain, and
// an mbox file of two report mails around a message without a report.
func ImportTree(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rep := func(seed int64, domain string) []byte {
		return reportgen.Generate(seed, 5, reportgen.Options{Domain: domain})
	}
	write("a.xml", rep(1, "example.com"))
	write(filepath.Join("sub dir", "b [1] (x)!=.xml.gz"), reportgen.Gzip(rep(2, "example.com")))
	write(filepath.Join("sub dir", "c.zip"), reportgen.Zip("c.xml", rep(3, "example.com")))
	write(".hidden.xml", rep(9, "example.com"))
	write(filepath.Join(".git", "x.xml"), rep(10, "example.com"))
	write("notes.txt", []byte("not a report\n"))
	write("README.md", []byte("# My DMARC reports\n"))
	write("other.xml", rep(6, "unregistered.test"))
	m4, _ := ReportMail("a@google.com", "abc@reports.test", 4, 5, reportgen.Options{Domain: "example.com"})
	m5, _ := ReportMail("a@google.com", "abc@reports.test", 5, 5, reportgen.Options{Domain: "example.com"})
	var mbox bytes.Buffer
	for _, m := range [][]byte{m4, []byte("Subject: hi\n\n>From me, hello\n"), m5} {
		mbox.WriteString("From a@google.com Thu Nov 20 10:00:00 2026\n")
		mbox.Write(m)
		mbox.WriteString("\n\n")
	}
	write("inbox.mbox", mbox.Bytes())
	return dir
}
