package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// senderRow is one record of a report: count messages from ip with the
// DMARC-evaluated DKIM and SPF results and the SPF-checked domain.
type senderRow struct {
	ip         string
	count      int
	dkim, spf  string
	spfDomain  string
	dkimDomain string
}

// dayReport is an RFC 7489 aggregate report for example.com covering one
// UTC day.
func dayReport(id string, day time.Time, rows ...senderRow) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<feedback><report_metadata><org_name>google.com</org_name><email>noreply-dmarc-support@google.com</email>
<report_id>%s</report_id><date_range><begin>%d</begin><end>%d</end></date_range></report_metadata>
<policy_published><domain>example.com</domain><adkim>r</adkim><aspf>r</aspf><p>none</p><sp>none</sp><pct>100</pct></policy_published>`,
		id, day.Unix(), day.Add(24*time.Hour-time.Second).Unix())
	for _, r := range rows {
		fmt.Fprintf(&b, `<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition>
<dkim>%s</dkim><spf>%s</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers>
<auth_results>`, r.ip, r.count, r.dkim, r.spf)
		if r.dkimDomain != "" {
			fmt.Fprintf(&b, `<dkim><domain>%s</domain><result>pass</result></dkim>`, r.dkimDomain)
		}
		fmt.Fprintf(&b, `<spf><domain>%s</domain><result>pass</result></spf></auth_results></record>`, r.spfDomain)
	}
	b.WriteString("</feedback>\n")
	return []byte(b.String())
}

// TestSendersEndToEnd sends a week and a day of reports over SMTP from a
// known service (Mailchimp, by its passing SPF domain, with a
// forward-confirmed reverse DNS name too), the domain's own server
// (authorized by its SPF record through an include), a spoofer without
// reverse DNS and a source whose PTR name does not confirm, all resolved
// by the real binary against a loopback DNS server, and checks /sources,
// /senders, /policy-advice (the published record read from DNS, its rua
// kept in the next record) and 'dmarcd senders'.
func TestSendersEndToEnd(t *testing.T) {
	ns := dnstest.Start(t)
	ns.AddTXT("example.com", "v=spf1 include:_spf.example.net -all")
	ns.AddTXT("_spf.example.net", "v=spf1 ip4:192.0.2.0/24 ~all")
	ptr := func(ip, host, forward string) {
		rev, err := dns.ReverseAddr(ip)
		if err != nil {
			t.Fatal(err)
		}
		ns.SetPTR(rev, host)
		ns.SetA(host, forward)
	}
	ptr("198.51.100.1", "mail1.mcsv.net", "198.51.100.1") // confirmed: Intuit Mailchimp
	ptr("192.0.2.5", "mx.example.com", "192.0.2.5")       // confirmed: the domain's own
	ptr("203.0.113.9", "fake.mcsv.net", "198.51.100.99")  // does not resolve back
	// 203.0.113.66 has no PTR record at all.

	s := StartServer(t, Options{DNS: ns})
	key := s.Key
	domID, email := s.CreateDomain("example.com")
	// The domain publishes p=none (it stays pending: the advice reads the
	// record from DNS, never from the reports).
	ns.AddTXT("_dmarc.example.com", "v=DMARC1; p=none; rua=mailto:"+email)
	rows := []senderRow{
		// No DKIM: only the SPF record (through its include) makes it authorized.
		{ip: "192.0.2.5", count: 100, dkim: "fail", spf: "pass", spfDomain: "example.com"},
		{ip: "198.51.100.1", count: 20, dkim: "pass", spf: "fail", spfDomain: "mcsv.net", dkimDomain: "example.com"},
		{ip: "203.0.113.66", count: 10, dkim: "fail", spf: "fail", spfDomain: "spoof.example"},
		{ip: "203.0.113.9", count: 5, dkim: "fail", spf: "fail", spfDomain: "fake.example"},
	}
	const days = 8
	today := time.Now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -days)
	addr := s.SMTPAddr()
	const from = "noreply-dmarc-support@google.com"
	for d := range days {
		xml := dayReport(fmt.Sprint("senders-e2e-", d), first.AddDate(0, 0, d), rows...)
		if err := sendMail(addr, from, []string{email}, ingesttest.MailWith(from, email, xml, "text/xml", "report.xml")); err != nil {
			t.Fatalf("sending report %d: %v", d, err)
		}
	}
	if _, total := s.Reports(domID); total != days {
		t.Fatalf("%d reports stored, want %d", total, days)
	}

	// The reverse DNS job looks at new sources when the server starts and
	// every 30s: a restart gets it done now, and shows it persists.
	s.Stop()
	s = StartServer(t, Options{DataDir: s.DataDir, DNS: ns})
	window := fmt.Sprintf("?date_from=%d&date_to=%d", first.Unix(), today.Unix())
	var sources []any
	waitFor(t, 30*time.Second, "reverse DNS of the sources", func() bool {
		r := s.Must(http.StatusOK, "GET", "/api/v1/domains/"+domID+"/sources"+window, key, nil)
		sources, _ = r["data"].([]any)
		for _, x := range sources {
			if src := x.(map[string]any); src["source_ip"] == "192.0.2.5" && src["hostname"] != nil {
				return true
			}
		}
		return false
	})
	byIP := map[string]map[string]any{}
	for _, x := range sources {
		src := x.(map[string]any)
		byIP[src["source_ip"].(string)] = src
	}
	if len(sources) != 4 || sources[0].(map[string]any)["source_ip"] != "192.0.2.5" {
		t.Fatalf("sources %v, want 4, most messages first", sources)
	}
	mc := byIP["198.51.100.1"]
	sender, _ := mc["sender"].(map[string]any)
	if mc["hostname"] != "mail1.mcsv.net" || mc["base_domain"] != "mcsv.net" || sender == nil || sender["name"] != "Intuit Mailchimp" ||
		mc["messages"] != float64(20*days) || mc["dkim_aligned_pass"] != float64(20*days) || mc["spf_aligned_pass"] != float64(0) {
		t.Errorf("Mailchimp source %v", mc)
	}
	if own := byIP["192.0.2.5"]; own["hostname"] != "mx.example.com" || own["sender"] != nil || own["dmarc_pass"] != float64(100*days) {
		t.Errorf("own source %v", own)
	}
	if sp := byIP["203.0.113.66"]; sp["hostname"] != nil || sp["messages"] != float64(10*days) {
		t.Errorf("spoofer source %v", sp)
	}
	if un := byIP["203.0.113.9"]; un["hostname"] != nil || un["base_domain"] != nil {
		t.Errorf("unconfirmed PTR name shown: %v", un)
	}

	r := s.Must(http.StatusOK, "GET", "/api/v1/domains/"+domID+"/senders"+window, key, nil)
	groups, _ := r["data"].([]any)
	byName := map[string]map[string]any{}
	for _, x := range groups {
		g := x.(map[string]any)
		byName[g["name"].(string)] = g
	}
	if len(groups) != 3 {
		t.Fatalf("senders %v, want 3 groups", groups)
	}
	if g := byName["example.com (own servers)"]; g == nil || g["type"] != "own" || g["evidence"] != "own_domain" || g["category"] != "authorized" || g["status"] != "passing" {
		t.Errorf("own group %v", g)
	}
	if g := byName["Intuit Mailchimp"]; g == nil || g["type"] != "service" || g["evidence"] != "spf" || g["category"] != "authorized" ||
		g["status"] != "passing" || g["spf_aligned_rate"] != float64(0) || g["dkim_aligned_rate"] != float64(1) {
		t.Errorf("Mailchimp group %v", g)
	}
	u := byName["Unidentified"]
	hints, _ := u["hints"].([]any)
	if u == nil || u["category"] != "unknown" || u["status"] != "failing" || u["source_ips"] != float64(2) ||
		len(hints) == 0 || !strings.Contains(fmt.Sprint(hints), "SPF record (TXT example.com)") {
		t.Errorf("unknown group %v", u)
	}

	a := s.Must(http.StatusOK, "GET", "/api/v1/domains/"+domID+"/policy-advice"+window, key, nil)
	next, _ := a["next_record"].(string)
	if a["stage"] != "ready_for_quarantine" || a["messages"] != float64(135*days) ||
		a["unknown_failing_messages"] != float64(15*days) || a["legitimate_pass_rate"] != float64(1) ||
		next != "v=DMARC1; p=quarantine; t=y; rua=mailto:"+email {
		t.Errorf("policy advice %v", a)
	}
	// Another organization's key sees no such domain.
	dd := "--data-dir=" + s.DataDir
	MustCLI(t, dd, "org", "create", "globex")
	otherKey := keyRE.FindString(MustCLI(t, dd, "keys", "create", "--org", "globex", "--name", "x").Stdout)
	for _, view := range []string{"sources", "senders", "policy-advice"} {
		if r := s.Do("GET", "/api/v1/domains/"+domID+"/"+view, otherKey, nil); r.Status != http.StatusNotFound {
			t.Errorf("%s of another organization's domain: %d", view, r.Status)
		}
	}

	out := MustCLI(t, "--data-dir", s.DataDir, "senders", "example.com", "--from", first.Format(time.DateOnly), "--to", today.Format(time.DateOnly))
	for _, want := range []string{"Intuit Mailchimp", "SPF mcsv.net, 1 address", "example.com (own servers)", "Unidentified",
		"Enforcement: ready for quarantine", "next record: _dmarc.example.com TXT \"v=DMARC1; p=quarantine; t=y; rua=mailto:" + email} {
		if !strings.Contains(out.Stdout, want) {
			t.Errorf("dmarcd senders output lacks %q:\n%s", want, out.Stdout)
		}
	}
}
