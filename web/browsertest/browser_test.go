// Package browsertest drives dmarcd's web interface in a real headless
// Chromium (chromedp) against the built binary: `dmarcd serve` on loopback
// ports with a temporary data dir, a real DNS server, reports sent by SMTP
// and a local HTTPS webhook receiver. Without a chromium binary the tests
// skip and say why.
//
// Screenshots of every page go to $DMARCD_SCREENSHOTS when set (the
// README's come from DMARCD_SCREENSHOTS=$PWD/docs/screenshots), else to a
// temporary directory.
package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	// The binary under test is built from the cli package; importing it
	// makes go test's cache see every change to what the binary holds.
	_ "github.com/dmarcd/dmarcd/cli"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/imaptest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
)

var (
	binary     string // the dmarcd binary built by TestMain
	chromePath string
	skipReason string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			chromePath = p
			break
		}
	}
	if chromePath == "" {
		skipReason = "no chromium binary in PATH (install Debian's chromium: apt-get install chromium)"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "dmarcd-browser-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "dmarcd")
	cmd := exec.Command("go", "build", "-o", binary, "../..")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dmarcd:", err)
		return 1
	}
	return m.Run()
}

// server is one running `dmarcd serve`.
type server struct {
	url, smtp, key string
	dataDir        string
	cmd            *exec.Cmd
	mu             sync.Mutex
	log            bytes.Buffer
	done           chan struct{}
}

func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	s := &server{done: make(chan struct{}), dataDir: t.TempDir()}
	s.cmd = exec.Command(binary, append([]string{"serve", "--data-dir", s.dataDir, "--listen", "127.0.0.1:0",
		"--smtp-listen", "127.0.0.1:0", "--reporting-domain", "reports.dmarcd.test", "--log-format", "json"}, args...)...)
	var stdout bytes.Buffer
	s.cmd.Stdout = &stdout
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var e struct{ Msg, API, SMTP string }
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Msg == "dmarcd started" {
				started <- [2]string{e.API, e.SMTP}
			}
			s.mu.Lock()
			s.log.Write(append(sc.Bytes(), '\n'))
			s.mu.Unlock()
		}
	}()
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	})
	select {
	case a := <-started:
		s.url, s.smtp = "http://"+a[0], a[1]
	case <-s.done:
		t.Fatalf("dmarcd exited:\n%s", s.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("dmarcd did not start:\n%s", s.logText())
	}
	for deadline := time.Now().Add(10 * time.Second); s.key == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// stdout is no terminal: the first key is in <data-dir>/bootstrap-key.
		if b, err := os.ReadFile(filepath.Join(s.dataDir, "bootstrap-key")); err == nil {
			s.key = regexp.MustCompile(`dmk_[0-9a-f]{32}`).FindString(string(b))
		}
	}
	if s.key == "" {
		t.Fatalf("no bootstrap key in %s/bootstrap-key; stdout:\n%s", s.dataDir, stdout.String())
	}
	return s
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// api calls the REST API with key and decodes the JSON answer.
func (s *server) api(t *testing.T, method, path, key string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// browser is one headless Chromium tab with its console watched.
type browser struct {
	t        *testing.T
	ctx      context.Context
	cancel   context.CancelFunc
	base     string
	shots    string
	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromePath),
		chromedp.NoSandbox, chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	b := &browser{t: t, ctx: ctx, base: base, shots: os.Getenv("DMARCD_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// The first Run starts the browser on the context without a timeout;
	// the console is watched from then on.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			// A form answered 422 (a refused input, shown on the page) is
			// logged by Chromium as a failed load: expected.
			if strings.Contains(m.Text, "status of 422") {
				continue
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, m.String()+" "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	b.ctx, b.cancel = context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(b.cancel)
	return b
}

func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that returns a value.
func get[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

type void = chromedp.Action[chromedp.Void]

func visible(sel string) void        { return chromedp.WaitVisible(chromedp.CSS(sel)) }
func click(sel string) void          { return chromedp.Click(chromedp.CSS(sel)) }
func submit(sel string) void         { return chromedp.Submit(chromedp.CSS(sel)) }
func sendKeys(sel, keys string) void { return chromedp.SendKeys(chromedp.CSS(sel), keys) }
func eval(js string) void {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[any](js)(ctx, t)
		return err
	})
}

// screenshot saves what the viewport shows as name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	png := get(b, "screenshot "+name, chromedp.CaptureScreenshot()) // the viewport: small files
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel))))
}

func (b *browser) body() string { return b.text("body") }

// noHorizontalScroll checks the page fits the viewport's width.
func (b *browser) noHorizontalScroll(page string) {
	b.t.Helper()
	if !get(b, "measure "+page, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`)) {
		w := get(b, "width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
		wide := get(b, "widest", chromedp.Evaluate[string](`Array.from(document.querySelectorAll("body *")).filter(e => (e.getBoundingClientRect().right > innerWidth + 1 || e.scrollWidth > e.clientWidth + 1) && !e.parentElement.closest(".scroll") && !e.closest("svg")).map(e => e.tagName + "." + e.className).slice(0, 6).join(" ")`))
		b.t.Errorf("%s scrolls horizontally at 390 px: %d px wide (%s)", page, w, wide)
	}
}

// reportMail is a receiver's report mail with a gzip attachment.
func reportMail(to string, xml []byte) []byte {
	var m bytes.Buffer
	fmt.Fprintf(&m, "From: noreply-dmarc@google.com\r\nTo: %s\r\nSubject: Report\r\nMIME-Version: 1.0\r\n", to)
	m.WriteString("Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain\r\n\r\nreport\r\n")
	m.WriteString("--b1\r\nContent-Type: application/gzip; name=\"r.xml.gz\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString(reportgen.Gzip(xml))
	for len(enc) > 76 {
		m.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	m.WriteString(enc + "\r\n--b1--\r\n")
	return m.Bytes()
}

// TestBrowser walks the interface as a person does, and checks the
// numbers it shows against the API's.
func TestBrowser(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	var received []string
	var rmu sync.Mutex
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rmu.Lock()
		received = append(received, string(body))
		rmu.Unlock()
	}))
	defer rcv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := dnstest.Start(t)
	// go-imap's in-memory IMAP server, in this process, for the mailbox pages.
	imapSrv := imaptest.NewServer(t)
	imapCA := filepath.Join(t.TempDir(), "imap-ca.pem")
	if err := os.WriteFile(imapCA, imapSrv.Cert.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--dns-server", ns.Addr, "--dns-timeout", "300ms", "--webhook-allow-private", "--webhook-ca-file", ca,
		"--imap-allow-private", "--imap-ca-file", imapCA)
	b := newBrowser(t, s.url)

	// Sign in.
	b.run("sign-in page", chromedp.Navigate(s.url+"/"), visible(`#key`))
	b.screenshot("login")
	b.run("sign in", sendKeys(`#key`, s.key), submit(`#key`),
		visible(`.tiles`))
	if !strings.Contains(b.body(), "No domains yet") {
		t.Errorf("empty overview: %s", b.body())
	}
	b.screenshot("overview-empty")

	// Add a domain and see its records.
	b.run("add a domain", click(`a[href="/domains/new"]`), visible(`#name`),
		sendKeys(`#name`, "example.com"), submit(`#name`),
		visible(`table.records`))
	body := b.body()
	for _, want := range []string{"Publish these DNS records", "_dmarc.example.com", "example.com._report._dmarc.reports.dmarcd.test",
		"_smtp._tls.example.com", "v=TLSRPTv1; rua=mailto:"} {
		if !strings.Contains(body, want) {
			t.Errorf("domain page lacks %q", want)
		}
	}
	b.screenshot("domain-pending")
	location := get(b, "location", chromedp.Location())
	domainID := location[strings.LastIndex(location, "/")+1:]
	_, dom := s.api(t, "GET", "/api/v1/domains/"+domainID, s.key)
	email, _ := dom["reporting_email"].(string)
	if email == "" {
		t.Fatalf("domain %s: %v", domainID, dom)
	}

	// Verify: first it fails and says why, then it works.
	b.run("verify", click(`form[action$="/verify"] button`), visible(`p.error`))
	if !strings.Contains(b.text("p.error"), "Verification failed") {
		t.Errorf("failed verify: %s", b.text("p.error"))
	}
	ns.SetTXT("_dmarc.example.com", []string{"v=DMARC1; p=none; rua=mailto:" + email})
	b.run("verify again", click(`form[action$="/verify"] button`), visible(`p.ok`))

	// Reports by SMTP; the pages must show the API's numbers.
	// Eight days of them: enough for the policy advice to judge (it needs
	// seven), so the enforcement card names what blocks p=quarantine.
	now := time.Now().UTC()
	const reports = 8
	for i := range reports {
		xml := reportgen.Generate(int64(i+1), 40, reportgen.Options{Domain: "example.com", OrgName: []string{"google.com", "yahoo.com"}[i%2],
			Begin: now.Truncate(24*time.Hour).AddDate(0, 0, -(i + 1))})
		if err := smtp.SendMail(s.smtp, nil, "noreply-dmarc@google.com", []string{email}, reportMail(email, xml)); err != nil {
			t.Fatalf("SMTP: %v", err)
		}
	}
	var stats map[string]any
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, list := s.api(t, "GET", "/api/v1/reports?domain_id="+domainID, s.key)
		if p, _ := list["pagination"].(map[string]any); p != nil && p["total"] == float64(reports) {
			_, stats = s.api(t, "GET", "/api/v1/domains/"+domainID+"/statistics", s.key)
			break
		}
	}
	if stats == nil {
		t.Fatalf("reports not stored:\n%s", s.logText())
	}
	messages := fmt.Sprintf("%v", int64(stats["message_count"].(float64)))
	b.run("overview", chromedp.Navigate(s.url+"/"), visible(`svg.chart`))
	first := b.text(".tiles .tile .n")
	if strings.ReplaceAll(first, ",", "") != messages {
		t.Errorf("overview shows %s messages, the API %s", first, messages)
	}
	b.screenshot("overview")
	b.run("domain page", chromedp.Navigate(s.url+"/domains/"+domainID), visible(`svg.chart`))
	if got := strings.ReplaceAll(b.text(".tiles .tile .n"), ",", ""); got != messages {
		t.Errorf("domain page shows %s messages, the API %s", got, messages)
	}
	b.screenshot("domain")

	// Who sends, the enforcement card, the sources drill-down.
	b.run("senders", chromedp.Navigate(s.url+"/domains/"+domainID+"#senders"), visible(`table.senders`), visible(`#enforcement .stage`))
	if got := b.text("#enforcement .stage"); got == "" {
		t.Error("the enforcement card shows no stage")
	}
	if n := get(b, "sender rows", chromedp.Evaluate[int](`document.querySelectorAll("table.senders tbody tr").length`)); n == 0 {
		t.Error("the who-sends table is empty")
	}
	// The reports name the services by their DKIM and SPF domains (the DNS
	// server has no PTR records), and the evidence is shown beside them.
	who := b.text("table.senders")
	for _, want := range []string{"Twilio SendGrid", "Amazon SES", "Intuit Mailchimp", "example.com (own servers)", "Unidentified",
		"DKIM d=sendgrid.net", "SPF amazonses.com"} {
		if !strings.Contains(who, want) {
			t.Errorf("who sends lacks %q", want)
		}
	}
	if enf := b.text("#enforcement"); !strings.Contains(enf, "What blocks it: ") || !strings.Contains(enf, "Intuit Mailchimp (") ||
		strings.Contains(enf, "Unidentified (") || !strings.Contains(enf, "will stop:") {
		t.Errorf("the enforcement card: %s", enf)
	}
	b.screenshot("domain-senders")
	b.run("enforcement", chromedp.Navigate(s.url+"/domains/"+domainID+"#enforcement"), visible(`#enforcement`))
	b.screenshot("domain-enforcement")
	b.run("sources", click(`a[href="/domains/`+domainID+`/sources"]`), visible(`table.sources`))
	_, srcs := s.api(t, "GET", "/api/v1/domains/"+domainID+"/sources?limit=1", s.key)
	if p, _ := srcs["pagination"].(map[string]any); p == nil || !strings.Contains(b.text("h1"), fmt.Sprintf("%v IPs", p["total"])) {
		t.Errorf("sources page %q, the API %v", b.text("h1"), srcs["pagination"])
	}
	b.screenshot("sources")

	// A TLS report, imported through the admin socket when import takes
	// them (TLS intake); the pages are shown either way.
	tlsFile := filepath.Join(t.TempDir(), "tls.json")
	day := now.Truncate(24*time.Hour).AddDate(0, 0, -1)
	tlsJSON := fmt.Sprintf(`{"organization-name":"Google Inc.","date-range":{"start-datetime":"%s","end-datetime":"%s"},`+
		`"contact-info":"smtp-tls-reporting@google.com","report-id":"2026-tls-1","policies":[{"policy":{"policy-type":"sts",`+
		`"policy-string":["version: STSv1","mode: enforce","mx: mx1.example.com","max_age: 86400"],"policy-domain":"example.com",`+
		`"mx-host":["mx1.example.com"]},"summary":{"total-successful-session-count":5326,"total-failure-session-count":303},`+
		`"failure-details":[{"result-type":"certificate-expired","sending-mta-ip":"2001:db8::25","receiving-mx-hostname":"mx1.example.com",`+
		`"failed-session-count":200},{"result-type":"starttls-not-supported","sending-mta-ip":"192.0.2.77",`+
		`"receiving-mx-hostname":"mx2.example.com","receiving-ip":"203.0.113.56","failed-session-count":103,"additional-information":"<script>alert(1)</script>"}]}]}`,
		day.Format(time.RFC3339), day.Add(24*time.Hour-time.Second).Format(time.RFC3339))
	if err := os.WriteFile(tlsFile, []byte(tlsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "import", "--data-dir", s.dataDir, tlsFile).CombinedOutput()
	_, tl := s.api(t, "GET", "/api/v1/tls-reports", s.key)
	if p, _ := tl["pagination"].(map[string]any); err == nil && p != nil && p["total"] == 1.0 {
		b.run("TLS section", chromedp.Navigate(s.url+"/domains/"+domainID+"#tls"), visible(`#tls svg.chart`))
		if body := b.text("#tls"); !strings.Contains(body, "certificate-expired") || !strings.Contains(body, "mx2.example.com") {
			t.Errorf("TLS section: %s", body)
		}
		b.screenshot("domain-tls")
		b.run("TLS reports", chromedp.Navigate(s.url+"/tls-reports"), visible(`td a[href^="/tls-reports/"]`))
		b.screenshot("tls-reports")
		b.run("a TLS report", click(`td a[href^="/tls-reports/"]`), visible(`dl.facts`))
		if !strings.Contains(b.body(), "<script>alert(1)</script>") { // shown as text, not run
			t.Error("the TLS report page does not show additional-information as text")
		}
		b.screenshot("tls-report")
	} else {
		t.Logf("TLS step skipped: `dmarcd import` did not store the TLS report (TLS intake not in this build): %v %s", err, out)
		b.run("TLS reports", chromedp.Navigate(s.url+"/tls-reports"), visible(`main`))
		b.screenshot("tls-reports-empty")
	}

	b.run("reports", chromedp.Navigate(s.url+"/reports"), visible(`table`))
	b.screenshot("reports")
	b.run("a report", click(`td a[href^="/reports/"]`), visible(`a[href$="/csv"]`))
	b.screenshot("report")

	// An alert, dismissed in the UI, is dismissed in the API.
	_, alerts := s.api(t, "GET", "/api/v1/alerts?status=pending", s.key)
	if data, _ := alerts["data"].([]any); len(data) > 0 {
		id := data[0].(map[string]any)["id"].(string)
		b.run("alerts", chromedp.Navigate(s.url+"/alerts"), visible(`ul.alerts`))
		b.screenshot("alerts")
		b.run("dismiss", click(`button[formaction="/alerts/`+id+`/dismiss"]`),
			visible(`h1`))
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			_, a := s.api(t, "GET", "/api/v1/alerts?status=dismissed", s.key)
			if d, _ := a["data"].([]any); len(d) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Error("the alert is not dismissed in the API")
				break
			}
		}
	} else {
		t.Errorf("the reports raised no alert to dismiss: %v", alerts)
	}

	// Create a key (shown once), use it, revoke it.
	b.run("keys", chromedp.Navigate(s.url+"/settings/keys"), visible(`#kname`),
		sendKeys(`#kname`, "ci"), click(`input[value="read"]`),
		submit(`#kname`), visible(`#new-key`))
	newKey := b.text("#new-key")
	b.screenshot("keys-created")
	if code, _ := s.api(t, "GET", "/api/v1/domains", newKey); code != 200 {
		t.Fatalf("the new key: %d", code)
	}
	_, keys := s.api(t, "GET", "/api/v1/keys", s.key)
	var keyID string
	for _, k := range keys["data"].([]any) {
		if m := k.(map[string]any); m["name"] == "ci" {
			keyID = m["id"].(string)
		}
	}
	b.run("revoke: open and confirm", chromedp.Navigate(s.url+"/settings/keys"),
		click(`tr:has(form[action="/settings/keys/`+keyID+`/revoke"]) summary`),
		click(`form[action="/settings/keys/`+keyID+`/revoke"] button`),
		visible(`p.ok`))
	if code, _ := s.api(t, "GET", "/api/v1/domains", newKey); code != 401 {
		t.Errorf("the revoked key: %d", code)
	}

	// A webhook against the local HTTPS receiver, tested from the page.
	b.run("webhooks", chromedp.Navigate(s.url+"/settings/webhooks"), visible(`#hurl`),
		sendKeys(`#hname`, "ops"), sendKeys(`#hurl`, rcv.URL+"/hook"),
		submit(`#hurl`), visible(`#new-secret`))
	if !strings.HasPrefix(b.text("#new-secret"), "whsec_") {
		t.Errorf("webhook secret: %q", b.text("#new-secret"))
	}
	b.run("test webhook", click(`form[action$="/test"] button`), visible(`article.hook p.ok`))
	if !strings.Contains(b.text("article.hook p.ok"), "HTTP 200") {
		t.Errorf("test result: %s", b.text("article.hook p.ok"))
	}
	rmu.Lock()
	if len(received) == 0 || !strings.Contains(received[len(received)-1], `"test":true`) {
		t.Errorf("receiver got %v", received)
	}
	rmu.Unlock()
	b.screenshot("webhooks")
	// A mailbox on the in-memory IMAP server holding a report: a wrong
	// password is refused with the server's words, the right one is
	// added, Poll now shows its result, the report is imported and moved.
	mailXML := reportgen.Generate(99, 10, reportgen.Options{Domain: "example.com", OrgName: "mailbox.example",
		Begin: now.Truncate(24*time.Hour).AddDate(0, 0, -1)})
	imapSrv.Append("INBOX", reportMail(email, mailXML))
	fill := func(password string) string {
		return fmt.Sprintf(`document.querySelector('#mhost').value = '127.0.0.1'; document.querySelector('#mport').value = '%d';
			document.querySelector('#muser').value = %q; document.querySelector('#mpass').value = %q;
			document.querySelector('#march').value = 'Archive';`, imapSrv.Port, imaptest.User, password)
	}
	b.run("mailboxes", chromedp.Navigate(s.url+"/settings/mailboxes"), visible(`#mhost`))
	b.screenshot("mailboxes-empty")
	// Only the chosen sign-in's fields show (CSS :has, no script).
	shown := func(sel string) bool {
		return get(b, "visibility of "+sel, chromedp.Evaluate[bool](`document.querySelector("`+sel+`").offsetParent !== null`))
	}
	if !shown("#mpass") || shown("#mcsec") {
		t.Error("with password sign-in, the OAuth2 fields show or the password does not")
	}
	b.run("choose OAuth2", click(`input[name=auth][value=oauth2]`))
	if shown("#mpass") || !shown("#mcsec") {
		t.Error("with OAuth2 sign-in, the password shows or the OAuth2 fields do not")
	}
	b.run("scroll to OAuth2", eval(`document.querySelector("#mtok").scrollIntoView()`))
	b.screenshot("mailbox-oauth2-form")
	b.run("choose the password", click(`input[name=auth][value=password]`))
	b.run("wrong password", eval(fill("wrong password")), submit(`#mhost`), visible(`form.mailbox p.error, section p.error`))
	if msg := b.text("p.error"); !strings.Contains(msg, "AUTHENTICATIONFAILED") {
		t.Errorf("wrong password: %q", msg)
	}
	b.screenshot("mailbox-refused")
	b.run("add a mailbox", eval(fill(imaptest.Pass)), submit(`#mhost`), visible(`p.ok`))
	if !strings.Contains(b.text("p.ok"), "The mailbox is added") {
		t.Errorf("after adding: %s", b.text("p.ok"))
	}
	location = get(b, "location", chromedp.Location())
	mailboxID := location[strings.LastIndex(location, "/")+1 : strings.Index(location, "?")]
	b.run("poll now", click(`form[action$="/poll"] button`), visible(`section.polled`))
	if got := b.text("section.polled"); !strings.Contains(got, "new mail") || !strings.Contains(got, "No errors.") {
		t.Errorf("poll result: %s", got)
	}
	b.screenshot("mailbox-polled")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, mb := s.api(t, "GET", "/api/v1/mailboxes/"+mailboxID, s.key)
		if mb["messages_imported"] == 1.0 && imapSrv.Count("Archive") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the mailbox's report was not imported and moved: %v, archive %d", mb, imapSrv.Count("Archive"))
			break
		}
	}
	b.run("mailbox list", chromedp.Navigate(s.url+"/settings/mailboxes"), visible(`table.mailboxes`))
	if row := b.text("table.mailboxes tbody"); !strings.Contains(row, imaptest.User) || !strings.Contains(row, "working") {
		t.Errorf("mailbox row: %s", row)
	}
	if strings.Contains(b.body(), imaptest.Pass) {
		t.Error("the mailbox list shows the password")
	}
	b.screenshot("mailboxes")

	b.run("settings", chromedp.Navigate(s.url+"/settings"), visible(`dl.facts`))
	b.screenshot("settings")

	// A phone: 390 px wide, one column, no horizontal scrolling.
	b.run("phone", chromedp.EmulateViewport(390, 844))
	for _, p := range []struct{ name, path string }{{"phone-overview", "/"}, {"phone-domain", "/domains/" + domainID},
		{"phone-keys", "/settings/keys"}, {"phone-reports", "/reports"},
		{"phone-senders", "/domains/" + domainID + "#senders"}, {"phone-enforcement", "/domains/" + domainID + "#enforcement"},
		{"phone-sources", "/domains/" + domainID + "/sources"}, {"phone-tls", "/domains/" + domainID + "#tls"},
		{"phone-tls-reports", "/tls-reports"}, {"phone-mailboxes", "/settings/mailboxes"},
		{"phone-mailbox", "/settings/mailboxes/" + mailboxID}} {
		b.run(p.name, chromedp.Navigate(s.url+p.path), visible(`main`))
		b.noHorizontalScroll(p.name)
		b.screenshot(p.name)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser console: %s", p)
	}
	t.Logf("screenshots in %s", b.shots)
}
