package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// TestDomainCommandsOffline runs 'dmarcd domain add|list|verify|delete'
// on the file with no server (issue 24 item 15): add prints the records
// POST /domains answers and how to verify, at the reporting domain the
// domains already use (saying so); a reserved name is a usage error
// naming the label; verify fails with the reason until the record is
// published; delete asks for --yes without a terminal.
func TestDomainCommandsOffline(t *testing.T) {
	dir := newDataDir(t) // organization acme, example.com at reports.test
	dd := "--data-dir=" + dir
	ns := dnstest.Start(t)
	ns.SetTXT("_dmarc.new.example", []string{"v=DMARC1; p=quarantine; rua=mailto:soc@new.example"})

	code, out, errOut := run(t, nil, dd, "domain", "add", "New.Example.", "--dns-server", ns.Addr)
	if code != 0 {
		t.Fatalf("add: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"Added new.example to organization acme", "Publish these DNS records",
		"_dmarc.new.example  TXT", "p=quarantine", "mailto:soc@new.example", "new.example._report._dmarc.reports.test  TXT",
		"_smtp._tls.new.example  TXT", "domain verify new.example"} {
		if !strings.Contains(out, want) {
			t.Errorf("add's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "reports.test") || !strings.Contains(errOut, "--reporting-domain") {
		t.Errorf("add without a server does not say which reporting domain it chose:\n%s", errOut)
	}

	code, out, errOut = run(t, nil, dd, "--json", "domain", "add", "other.example", "--dns-server", ns.Addr, "--reporting-domain", "Reports.Example.NET")
	var added struct {
		DNSRecords []struct{ Type, Name, Value string } `json:"dns_records"`
	}
	var raw map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &added) != nil || json.Unmarshal([]byte(out), &raw) != nil ||
		raw["name"] != "other.example" || !strings.HasSuffix(raw["reporting_email"].(string), "@reports.example.net") || len(added.DNSRecords) != 3 {
		t.Fatalf("add --json: exit %d\n%s%s", code, out, errOut)
	}
	email := raw["reporting_email"].(string)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"domain", "add", "a-domain.localhost"}, 2, "a-domain.localhost: .localhost is reserved"},
		{[]string{"domain", "add", "x.example", "--reporting-domain", "not_a_domain"}, 2, "--reporting-domain"},
		{[]string{"domain", "add", "new.example", "--dns-server", ns.Addr}, 1, "already"},
		{[]string{"domain", "add", "x.example", "--org", "nobody", "--dns-server", ns.Addr}, 1, "nobody"},
		{[]string{"domain", "verify", "other.example", "--dns-server", ns.Addr}, 1, "not verified"},
		{[]string{"domain", "verify", "nothing.example", "--dns-server", ns.Addr}, 1, "no domain nothing.example"},
		{[]string{"domain", "delete", "other.example"}, 2, "--yes"},
	} {
		code, out, errOut := run(t, nil, append([]string{dd}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("dmarcd %s: exit %d, want %d with %q\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, errOut)
		}
	}

	ns.SetTXT("_dmarc.other.example", []string{"v=DMARC1; p=none; rua=mailto:" + email})
	code, out, errOut = run(t, nil, dd, "domain", "verify", "other.example", "--dns-server", ns.Addr)
	if code != 0 || !strings.Contains(out, "other.example is verified") || !strings.Contains(out, "active") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = run(t, nil, dd, "domain", "list")
	if code != 0 || !strings.Contains(out, "other.example") || !strings.Contains(out, "active") || !strings.Contains(out, "new.example") ||
		!strings.Contains(out, "ORGANIZATION") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	code, out, errOut = run(t, nil, dd, "domain", "delete", "new.example", "--yes")
	if code != 0 || !strings.Contains(out, "Deleted new.example") {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = run(t, nil, dd, "--json", "domain", "list", "--org", "acme")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 {
		t.Errorf("list --json after delete: exit %d\n%s", code, out)
	}
}

// TestDomainCommandsThroughSocket runs 'dmarcd domain add' and 'verify'
// against a running server's admin socket (the test holds the file, so an
// offline fallback could not open it): the server's reporting domain,
// public URL and DNS answer, and no offline note is printed.
func TestDomainCommandsThroughSocket(t *testing.T) {
	dataDir := newDataDir(t)
	g := &globalOptions{DataDir: dataDir}
	db, err := g.openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Store: db, DNS: &dnscheck.Checker{Resolver: res}, ReportingDomain: "reports.example.net",
		PublicURL: "https://dmarc.example.net"})
	ln, err := admin.Listen(g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: admin.Handler(&admin.Local{DB: db, App: a}, slog.New(slog.DiscardHandler))}
	go hs.Serve(ln)
	defer hs.Close()

	code, out, errOut := run(t, nil, "--data-dir", dataDir, "domain", "add", "sock.example", "--dns-server", "192.0.2.1")
	if code != 0 || !strings.Contains(out, "@reports.example.net") || !strings.Contains(out, "https://dmarc.example.net/tlsrpt/") || errOut != "" {
		t.Fatalf("add through the socket: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, "--data-dir", dataDir, "domain", "verify", "sock.example"); code != 1 || !strings.Contains(errOut, "not verified") {
		t.Errorf("verify through the socket: exit %d %s", code, errOut)
	}
	c, err := admin.Dial(context.Background(), g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if doms, err := c.ListDomains(context.Background(), "acme"); err != nil || len(doms) != 2 {
		t.Errorf("list over the socket: %d, %v", len(doms), err)
	}
}
