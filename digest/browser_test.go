package digest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// chromium is the path of a Chromium binary, "" when none is installed.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestDigestInBrowser renders a weekly digest with every section in
// headless Chromium at a desktop's width and a phone's 390 px: nothing
// scrolls sideways on the phone, the page loads nothing (no script, SVG,
// image or style sheet), and it logs no error. Screenshots go to
// $DMARCD_SCREENSHOTS (docs/screenshots when refreshing them), else a
// temporary directory. Without Chromium the test skips.
func TestDigestInBrowser(t *testing.T) {
	path := chromium()
	if path == "" {
		t.Skip("no chromium binary in PATH (install Debian's chromium: apt-get install chromium)")
	}
	e := newTestEnv(t)
	e.fill(t)
	week := time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		storetest.MustTLSReport(t, e.DB, e.com, tlsReport("t"+string(rune('a'+i)), week.AddDate(0, 0, i), "certificate-expired", "mx1.example.com", int64(10*i+3)), now)
	}
	e.ingest(t, e.acme, handReport("new1", "example.org", "167.89.1.1", week.AddDate(0, 0, 2), 20, "pass", "fail"))
	srv := dnstest.Start(t)
	srv.AddTXT("_dmarc.example.com", "v=DMARC1; p=none; rua=mailto:com@reports.test")
	srv.AddTXT("_dmarc.example.org", "v=DMARC1; p=quarantine; rua=mailto:org@reports.test")
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{srv.Addr}, Timeout: 2 * time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &digest.Builder{DB: e.DB, Views: &senders.Views{DB: e.DB, Known: senders.DefaultKnownSenders(), SPF: senders.NewSPFCache(res, 0), DMARC: res}}
	d, err := b.Build(context.Background(), e.acme.ID, digest.Week, now)
	if err != nil {
		t.Fatal(err)
	}
	m, err := digest.Render(d, digest.RenderOptions{PublicURL: "https://dmarc.example.net",
		SettingsURL: "https://dmarc.example.net/settings/notifications?email=ops%40example.net"})
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(m.HTML))
	}))
	defer page.Close()

	shots := os.Getenv("DMARCD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	var problems []string
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				problems = append(problems, m.String())
			}
		}
	}()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, v := range []struct {
		name          string
		width, height int64
	}{{"digest-desktop", 1280, 900}, {"digest-phone", 390, 844}} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(v.width, v.height), chromedp.Navigate(page.URL),
			chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
		if err != nil {
			t.Fatal(err)
		}
		if !fits {
			t.Errorf("%s scrolls sideways at %d px", v.name, v.width)
		}
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[string](`performance.getEntriesByType("resource").map(e => e.name).filter(n => !n.endsWith("/favicon.ico")).concat(Array.from(document.querySelectorAll("script, svg, img, link, style, iframe, object")).map(e => e.tagName)).join(" ")`))
		if err != nil {
			t.Fatal(err)
		}
		if loaded != "" {
			t.Errorf("%s: the digest loads or holds scripts, images, style sheets or other resources: %s", v.name, loaded)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, v.name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(problems) > 0 {
		t.Errorf("console: %v", problems)
	}
}
