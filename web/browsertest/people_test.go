package browsertest

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base32"
	encbin "encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// dmarcd runs a command of the binary against s (through its admin
// socket) and returns its standard output.
func (s *server) dmarcd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, append(args, "--data-dir", s.dataDir)...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("dmarcd %s: %v %s", strings.Join(args, " "), err, msg)
	}
	return string(out)
}

var inviteLine = regexp.MustCompile(`(?m)^(https?://\S+/invite/\S+)$`)

// userAdd runs dmarcd user add and returns the link's path.
func (s *server) userAdd(t *testing.T, email, org, role string) string {
	t.Helper()
	out := s.dmarcd(t, "user", "add", email, "--org", org, "--role", role)
	m := inviteLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("dmarcd user add printed no link on a line of its own:\n%s", out)
	}
	u, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}

// addDomain registers name in the organization of key.
func (s *server) addDomain(t *testing.T, key, name string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/api/v1/domains", strings.NewReader(`{"name":"`+name+`"}`))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("creating %s: %d", name, resp.StatusCode)
	}
	_, m := s.api(t, "GET", "/api/v1/domains", key)
	for _, d := range m["data"].([]any) {
		if d := d.(map[string]any); d["name"] == name {
			return d["id"].(string)
		}
	}
	t.Fatalf("%s not listed", name)
	return ""
}

// orgKey creates a full-scope key of org and returns it.
func (s *server) orgKey(t *testing.T, org string) string {
	t.Helper()
	key := regexp.MustCompile(`dmk_[0-9a-f]{32}`).FindString(s.dmarcd(t, "keys", "create", "--org", org, "--name", "setup"))
	if key == "" {
		t.Fatalf("no key for %s", org)
	}
	return key
}

// totp is the RFC 6238 code of a base32 secret now.
func totp(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	key, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	var msg [8]byte
	encbin.BigEndian.PutUint64(msg[:], uint64(at.Unix()/30))
	m := hmac.New(sha1.New, key)
	m.Write(msg[:])
	sum := m.Sum(nil)
	o := sum[len(sum)-1] & 0x0f
	return fmt.Sprintf("%06d", (encbin.BigEndian.Uint32(sum[o:o+4])&0x7fffffff)%1000000)
}

// writeControls lists the forms of the page that change something (all
// POST forms but sign-out and the organization switcher) and the links
// to the pages that make something.
const writeControls = `Array.from(document.querySelectorAll("form[method=post]")).map(f => f.getAttribute("action")).
	filter(a => a !== "/logout" && a !== "/orgs/switch").
	concat(Array.from(document.querySelectorAll("a[href='/domains/new']")).map(a => "link " + a.getAttribute("href"))).join(" ")`

const password = "a long enough password"

// dropHeading removes the page's heading, so that waiting for one after
// a form's POST waits for the page that answers it.
const dropHeading = `document.querySelector("main h1").remove()`

// orgButton selects the switcher's button of the organization named org.
func orgButton(org string) chromedp.JSPath {
	return chromedp.JSPath(`Array.from(document.querySelectorAll(".orgswitch button")).filter(b => b.textContent.trim() === "` + org + `")`)
}

// TestBrowserPeople walks issue 26 as people do: the first owner made by
// dmarcd user add sets a password from the link, invites a client as a
// viewer from the People page, turns on two-step sign-in and signs in
// with a code; the client accepts two invitations, switches between
// their organizations, sees no write control anywhere and cannot reach
// a third organization. Screenshots (desktop and 390 px): sign-in, the
// code step, TOTP enrolment, people, the operator view, the audit log.
func TestBrowserPeople(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	s := startServer(t)
	s.dmarcd(t, "org", "create", "acme")
	s.dmarcd(t, "org", "create", "globex")
	acmeKey, globexKey := s.orgKey(t, "acme"), s.orgKey(t, "globex")
	s.addDomain(t, s.key, "msp.example")
	s.addDomain(t, acmeKey, "acme.example")
	s.addDomain(t, acmeKey, "mail.acme.example")
	globexDomain := s.addDomain(t, globexKey, "globex.example")
	ownerLink := s.userAdd(t, "owner@msp.example", "default", "owner")
	acmeOwnerLink := s.userAdd(t, "owner@msp.example", "acme", "owner")

	b := newBrowser(t, s.url)
	b.run("sign-in page", chromedp.Navigate(s.url+"/login"), visible(`#email`), visible(`#key`))
	b.screenshot("signin")

	// The owner sets a password from the CLI's link, and is signed in.
	b.run("owner's invitation", chromedp.Navigate(s.url+ownerLink), visible(`#password_confirm`),
		sendKeys(`#password`, password), sendKeys(`#password_confirm`, password), submit(`#password`), visible(`.tiles`))
	if !strings.Contains(b.text(".who"), "owner@msp.example") {
		t.Fatalf("after the invitation: %s", b.text(".who"))
	}
	b.run("owner's second invitation", chromedp.Navigate(s.url+acmeOwnerLink), visible(`#password`),
		sendKeys(`#password`, password), submit(`#password`), visible(`.orgswitch`))

	// The owner (now in acme, the link's organization) invites a client,
	// a viewer of acme, from the People page.
	b.run("people", chromedp.Navigate(s.url+"/settings/people"), visible(`#invite-email`),
		sendKeys(`#invite-email`, "client@acme.example"), submit(`#invite-email`), visible(`#invite-link`))
	clientLink, err := url.Parse(b.text(`#invite-link`))
	if err != nil || !strings.HasPrefix(clientLink.Path, "/invite/") {
		t.Fatalf("invitation link %q", b.text(`#invite-link`))
	}
	b.screenshot("people")
	// The client's second organization: the owner switches to default
	// and invites them there too.
	b.run("open the switcher", click(`.orgswitch summary`), visible(`.orgswitch ul`))
	b.run("switch to default", eval(dropHeading), chromedp.Click(orgButton("default")), visible(`main h1`))
	if !strings.Contains(b.text(".orgswitch summary"), "default") {
		t.Fatalf("after switching: %s", b.text(".who"))
	}
	b.run("people of default", chromedp.Navigate(s.url+"/settings/people"), visible(`#invite-email`),
		sendKeys(`#invite-email`, "client@acme.example"), submit(`#invite-email`), visible(`#invite-link`))
	clientLink2, _ := url.Parse(b.text(`#invite-link`))

	// Two-step sign-in: enrol, confirm with a code.
	b.run("account", chromedp.Navigate(s.url+"/settings/account"), visible(`#totp button`),
		click(`#totp button`), visible(`#totp-secret`))
	b.screenshot("account-totp")
	secret := b.text(`#totp-secret`)
	b.run("confirm", sendKeys(`#code`, totp(t, secret, time.Now())), submit(`#code`), visible(`#recovery-codes`))
	b.screenshot("account-recovery-codes")

	// The operator view and the audit log.
	b.run("orgs", chromedp.Navigate(s.url+"/orgs"), visible(`table.domains`))
	if body := b.body(); !strings.Contains(body, "acme.example") || !strings.Contains(body, "msp.example") || strings.Contains(body, "globex") {
		t.Errorf("operator view: %s", body)
	}
	b.screenshot("orgs")
	b.run("audit", chromedp.Navigate(s.url+"/settings/audit"), visible(`table`))
	if body := b.body(); !strings.Contains(body, "member.add") || !strings.Contains(body, "totp.enable") {
		t.Errorf("audit log: %s", body)
	}
	b.screenshot("audit")

	// Signing in again asks for a code after the password.
	b.run("sign out", click(`.who button.link`), visible(`#email`))
	b.run("password", sendKeys(`#email`, "owner@msp.example"), sendKeys(`#password`, password), submit(`#password`), visible(`#totp`))
	b.screenshot("signin-totp")
	next := time.Now().Add(30 * time.Second) // the enrolment used this step's code
	time.Sleep(time.Until(next.Truncate(30 * time.Second)))
	b.run("code", sendKeys(`#totp`, totp(t, secret, time.Now())), submit(`#totp`), visible(`main`))
	if !strings.Contains(b.text(".who"), "owner@msp.example") {
		t.Fatalf("after the code: %s", b.body())
	}

	// Phone width: the same pages fit 390 px.
	b.run("phone", chromedp.EmulateViewport(390, 844))
	for _, p := range []struct{ name, path string }{{"phone-people", "/settings/people"}, {"phone-orgs", "/orgs"},
		{"phone-audit", "/settings/audit"}, {"phone-account", "/settings/account"}} {
		b.run(p.name, chromedp.Navigate(s.url+p.path), visible(`main h1`))
		b.noHorizontalScroll(p.name)
		b.screenshot(p.name)
	}
	b.run("sign out on a phone", click(`.who button.link`), visible(`#email`))
	b.noHorizontalScroll("phone-signin")
	b.screenshot("phone-signin")
	b.run("phone code step", sendKeys(`#email`, "owner@msp.example"), sendKeys(`#password`, password), submit(`#password`), visible(`#totp`))
	b.noHorizontalScroll("phone-signin-totp")
	b.screenshot("phone-signin-totp")
	b.run("desktop", chromedp.EmulateViewport(1280, 900))

	// The client accepts both invitations.
	c := newBrowser(t, s.url)
	c.run("client's invitation", chromedp.Navigate(s.url+clientLink.Path), visible(`#password_confirm`),
		sendKeys(`#password`, password), sendKeys(`#password_confirm`, password), submit(`#password`), visible(`.who`))
	c.run("client's second invitation", chromedp.Navigate(s.url+clientLink2.Path), visible(`#password`),
		sendKeys(`#password`, password), submit(`#password`), visible(`.orgswitch`))
	c.run("sign out", click(`.who button.link`), visible(`#email`))
	c.run("client signs in", sendKeys(`#email`, "client@acme.example"), sendKeys(`#password`, password), submit(`#password`), visible(`.orgswitch`))
	if who := c.text(".who"); !strings.Contains(who, "client@acme.example") || !strings.Contains(who, "viewer") {
		t.Fatalf("client signed in: %s", who)
	}
	for _, org := range []string{"default", "acme"} {
		c.run("switch to "+org, click(`.orgswitch summary`), visible(`.orgswitch ul`), eval(dropHeading),
			chromedp.Click(orgButton(org)), visible(`main h1`))
		if got := c.text(".orgswitch summary"); !strings.Contains(got, org) {
			t.Fatalf("switched to %s, header says %q", org, got)
		}
		for _, path := range []string{"/", "/alerts", "/reports", "/settings", "/settings/keys", "/settings/webhooks", "/settings/mailboxes"} {
			c.run("viewer "+path, chromedp.Navigate(s.url+path), visible(`main h1`))
			if w := get(c, "write controls", chromedp.Evaluate[string](writeControls)); w != "" {
				t.Errorf("viewer in %s sees write controls on %s: %s", org, path, w)
			}
		}
	}
	// acme's domain page: no Verify, no Delete.
	c.run("orgs", chromedp.Navigate(s.url+"/orgs"), visible(`table.domains`))
	if body := c.body(); strings.Contains(body, "globex") || !strings.Contains(body, "acme.example") {
		t.Errorf("client's operator view: %s", body)
	}
	// Another organization's page is not found.
	c.run("globex", chromedp.Navigate(s.url+"/domains/"+globexDomain), visible(`main h1`))
	if h := c.text("main h1"); h != "Not found" || strings.Contains(c.body(), "globex.example") {
		t.Errorf("globex's domain for acme's client: %q", h)
	}
	for _, bb := range []*browser{b, c} {
		bb.mu.Lock()
		for _, p := range bb.problems {
			if !strings.Contains(p, "status of 404") { // globex's page, on purpose
				t.Errorf("console problem: %s", p)
			}
		}
		bb.mu.Unlock()
	}
}
