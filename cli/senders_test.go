package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// sendersDay is the day of the test reports.
var sendersDay = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

// senderRow is one record of a test report.
type senderRow struct {
	ip, dkim, spf, spfDomain string
	count                    int
}

// senderReport is an RFC 7489 aggregate report for example.com of one day.
func senderReport(id string, rows ...senderRow) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0"?><feedback><report_metadata><org_name>google.com</org_name>
<email>noreply@google.com</email><report_id>%s</report_id><date_range><begin>%d</begin><end>%d</end></date_range>
</report_metadata><policy_published><domain>example.com</domain><p>none</p></policy_published>`,
		id, sendersDay.Unix(), sendersDay.Add(24*time.Hour-time.Second).Unix())
	for _, r := range rows {
		fmt.Fprintf(&b, `<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers>
<auth_results><spf><domain>%s</domain><result>pass</result></spf></auth_results></record>`, r.ip, r.count, r.dkim, r.spf, r.spfDomain)
	}
	b.WriteString("</feedback>")
	return []byte(b.String())
}

// sendersDataDir is newDataDir with one imported report: Mailchimp (a
// known service by its confirmed name, SPF not aligned), the domain's own
// server (authorized by SPF over DNS), and a spoofer. It returns the data
// directory and a DNS server publishing example.com's SPF record.
func sendersDataDir(t *testing.T) (string, *dnstest.Server) {
	t.Helper()
	dataDir := newDataDir(t)
	report := filepath.Join(t.TempDir(), "report.xml")
	if err := os.WriteFile(report, senderReport("r1",
		senderRow{"198.51.100.1", "fail", "fail", "mcsv.net", 60},
		senderRow{"192.0.2.5", "fail", "pass", "example.com", 300},
		senderRow{"203.0.113.66", "fail", "fail", "spoof.example", 40},
	), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(t, nil, "--data-dir", dataDir, "import", report); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	db, err := (&globalOptions{DataDir: dataDir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	err = db.PutRDNS([]store.RDNSEntry{
		{IP: "198.51.100.1", Status: store.RDNSConfirmed, Hostname: "mail1.mcsv.net", CheckedAt: sendersDay},
		{IP: "192.0.2.5", Status: store.RDNSConfirmed, Hostname: "mx.example.com", CheckedAt: sendersDay},
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := dnstest.Start(t)
	srv.AddTXT("example.com", "v=spf1 ip4:192.0.2.0/24 -all")
	srv.AddTXT("_dmarc.example.com", "v=DMARC1; p=none; rua=mailto:dmarc@example.com")
	return dataDir, srv
}

// checkSendersOutput checks the table, the figures and the advice of the
// test data: senders named as the web names them, with their evidence,
// and legitimate, forwarded and unidentified mail adding up to the
// window's messages.
func checkSendersOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"example.com (organization acme), 2026-10-23 to 2026-11-21 (30 days)",
		"SENDER", "EVIDENCE",
		"SPF passes for mcsv.net but is not aligned",
		"400 messages in these 30 days:",
		"  legitimate (authorized senders): 360 messages from 2 senders, 83.3% passing DMARC",
		"  forwarded (your DKIM, relayed on): none",
		"  unidentified (no evidence it is yours; p=reject stops it): 40 messages from 1 sender, 0.0% passing DMARC",
		"Enforcement: not enough data (published: p=none)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Each group's row: its name, its evidence, its category, its
	// addresses and messages, its DMARC pass rate and status.
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		for _, name := range []string{"Intuit Mailchimp", "example.com (own servers)", "Unidentified"} {
			if strings.HasPrefix(line, name+"  ") {
				rows[name] = strings.Join(strings.Fields(line), " ")
			}
		}
	}
	for name, want := range map[string]string{
		"Intuit Mailchimp":          "Intuit Mailchimp SPF mcsv.net, 1 address authorized 1 60 0.0% 0.0% 0.0% failing",
		"example.com (own servers)": "example.com (own servers) SPF example.com, 1 address authorized 1 300 100.0% 100.0% 0.0% passing",
		"Unidentified":              "Unidentified no verified DKIM, passing SPF or host name, 1 address unknown 1 40 0.0% 0.0% 0.0% failing",
	} {
		if rows[name] != want {
			t.Errorf("row %q, want %q", rows[name], want)
		}
	}
}

// TestSendersOffline runs 'dmarcd senders' on the database file: the
// table, --json, a window without mail, and its bad calls.
func TestSendersOffline(t *testing.T) {
	dataDir, srv := sendersDataDir(t)
	dd := "--data-dir=" + dataDir
	args := []string{dd, "senders", "example.com", "--dns-server", srv.Addr, "--to", "2026-11-21"}
	code, out, errOut := run(t, nil, args...)
	if code != 0 {
		t.Fatalf("senders: exit %d\n%s%s", code, out, errOut)
	}
	checkSendersOutput(t, out)

	code, out, errOut = run(t, nil, append(args, "--json", "--org", "ACME")...)
	var v admin.SendersView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("senders --json: exit %d\n%s%s", code, out, errOut)
	}
	cats := map[string]string{}
	for _, g := range v.Senders {
		cats[g.Name] = g.Category + "/" + g.Status + "/" + g.Evidence
	}
	if len(v.Senders) != 3 || cats["Intuit Mailchimp"] != "authorized/failing/spf" || cats["example.com (own servers)"] != "authorized/passing/own_domain" ||
		cats["Unidentified"] != "unknown/failing/none" || v.Advice == nil || v.Advice.Stage != senders.StageNotEnoughData || v.Domain != "example.com" {
		t.Errorf("--json: %d groups %v, advice %+v", len(v.Senders), cats, v.Advice)
	}
	if b := v.Breakdown; b.Messages != 400 || b.Legitimate.Messages+b.Forwarded.Messages+b.Unidentified.Messages != b.Messages ||
		b.Legitimate.DMARCPass != 300 || b.Unidentified.Messages != 40 {
		t.Errorf("--json breakdown %+v", b)
	}

	code, out, _ = run(t, nil, dd, "senders", "example.com", "--from", "2026-01-01", "--to", "2026-01-31T12:00:00Z")
	if code != 0 || !strings.Contains(out, "No reports in this window.") {
		t.Errorf("empty window: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"senders"}, 2, "DOMAIN"},
		{[]string{"senders", "example.com", "--from", "yesterday"}, 2, "--from"},
		{[]string{"senders", "example.com", "--from", "2026-11-02", "--to", "2026-11-01"}, 2, "before"},
		{[]string{"senders", "example.com", "--from", "2024-01-01", "--to", "2026-01-01"}, 1, "366"},
		{[]string{"senders", "example.org"}, 1, "no domain example.org"},
		{[]string{"senders", "example.com", "--org", "globex"}, 1, "not found"},
		{[]string{"senders", "example.com", "--sender-map", filepath.Join(t.TempDir(), "missing.csv")}, 2, "--sender-map"},
	} {
		code, _, errOut := run(t, nil, append([]string{dd}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("dmarcd %s: exit %d %q; want %d mentioning %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
}

// TestSendersAmbiguousDomain ensures a name registered by two
// organizations needs --org.
func TestSendersAmbiguousDomain(t *testing.T) {
	dataDir := newDataDir(t)
	db, err := (&globalOptions{DataDir: dataDir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	org, err := db.CreateOrganization("globex", store.PlanUnlimited)
	if err == nil {
		err = db.CreateDomain(&store.Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "xyz@reports.test", DMARCRecord: "v=DMARC1; p=none"})
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	dd := "--data-dir=" + dataDir
	if code, _, errOut := run(t, nil, dd, "senders", "example.com"); code != 1 || !strings.Contains(errOut, "--org") || !strings.Contains(errOut, "globex") {
		t.Errorf("ambiguous: exit %d %s", code, errOut)
	}
	if code, out, errOut := run(t, nil, dd, "senders", "example.com", "--org", "globex"); code != 0 || !strings.Contains(out, "organization globex") {
		t.Errorf("--org globex: exit %d %s%s", code, out, errOut)
	}
}

// TestSendersThroughSocket runs 'dmarcd senders' against a running
// server's admin socket: the test holds the database file, so an offline
// fallback could not open it, and the server's views (with its DNS) answer.
func TestSendersThroughSocket(t *testing.T) {
	dataDir, srv := sendersDataDir(t)
	g := &globalOptions{DataDir: dataDir}
	db, err := g.openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	views := &senders.Views{DB: db, Known: senders.DefaultKnownSenders(), SPF: senders.NewSPFCache(res, 0), DMARC: res}
	ln, err := admin.Listen(g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: admin.Handler(&admin.Local{DB: db, Views: views}, slog.New(slog.DiscardHandler))}
	go hs.Serve(ln)
	defer hs.Close()

	code, out, errOut := run(t, nil, "--data-dir", dataDir, "senders", "EXAMPLE.COM.", "--to", "2026-11-21")
	if code != 0 {
		t.Fatalf("senders through the socket: exit %d\n%s%s", code, out, errOut)
	}
	checkSendersOutput(t, out)
	if code, _, errOut := run(t, nil, "--data-dir", dataDir, "senders", "example.org"); code != 1 || !strings.Contains(errOut, "no domain example.org") {
		t.Errorf("unknown domain through the socket: exit %d %s", code, errOut)
	}
	// A bad range is the store's ErrInvalid, carried over the socket.
	c, err := admin.Dial(context.Background(), g.socketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Senders(context.Background(), "", "example.com", sendersDay, sendersDay.AddDate(-2, 0, 0)); !strings.Contains(fmt.Sprint(err), "start is after its end") {
		t.Errorf("reversed range over the socket: %v", err)
	}
}
