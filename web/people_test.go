package web_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/web"
)

const testPassword = "correct horse battery"

// person makes email a member of org with role, through the operator,
// with testPassword set through the invitation link; it returns the
// membership.
func (e *env) person(org *store.Organization, email, role string) app.Member {
	e.t.Helper()
	m, token, err := e.app.AddMember(app.Operator(org), email, role)
	if err != nil {
		e.t.Fatalf("AddMember %s: %v", email, err)
	}
	if _, _, err := e.app.AcceptInvitation("192.0.2.1", token, testPassword); err != nil {
		e.t.Fatalf("AcceptInvitation %s: %v", email, err)
	}
	return m
}

// loginForm loads /login and returns the form's CSRF token and the
// cookie it is bound to.
func (e *env) loginForm() (token string, cookie *http.Cookie) {
	e.t.Helper()
	p := e.send("GET", "/login", "", nil)
	m := regexp.MustCompile(`name="csrf_token" value="([A-Za-z0-9_-]+)"`).FindStringSubmatch(p.body)
	if m == nil {
		e.t.Fatalf("no csrf_token on the sign-in page: %s", p.body)
	}
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "dmarcd_login" {
			return m[1], c
		}
	}
	e.t.Fatal("the sign-in page set no form cookie")
	return "", nil
}

// postLogin posts the password form with the page's CSRF token.
func (e *env) postLogin(form url.Values) page {
	e.t.Helper()
	token, c := e.loginForm()
	form.Set("csrf_token", token)
	return e.send("POST", "/login", "", form, "Cookie", c.Name+"="+c.Value)
}

// sessionOf returns the session cookie a sign-in answer set.
func sessionOf(t *testing.T, p page) string {
	t.Helper()
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == web.CookieName && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("no session cookie: %d %s", p.status, p.body)
	return ""
}

// signInAs signs in with email and testPassword.
func (e *env) signInAs(email string) string {
	e.t.Helper()
	p := e.postLogin(url.Values{"email": {email}, "password": {testPassword}})
	if p.status != http.StatusSeeOther {
		e.t.Fatalf("sign-in as %s: %d %s", email, p.status, p.body)
	}
	return sessionOf(e.t, p)
}

var errorRE = regexp.MustCompile(`<p class="error" role="alert">([^<]*)</p>`)

// TestPasswordSignIn ensures sign-in by email and password: one message
// for an unknown address and a wrong password, the form's CSRF token
// required, the session a person's (the header names them and their
// role), and the sign-in audited.
func TestPasswordSignIn(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "owner@alpha.example", "owner")

	unknown := e.postLogin(url.Values{"email": {"nobody@alpha.example"}, "password": {testPassword}})
	wrong := e.postLogin(url.Values{"email": {"owner@alpha.example"}, "password": {"not the password"}})
	if unknown.status != http.StatusUnauthorized || wrong.status != http.StatusUnauthorized {
		t.Fatalf("failed sign-ins: %d, %d", unknown.status, wrong.status)
	}
	mu, mw := errorRE.FindStringSubmatch(unknown.body), errorRE.FindStringSubmatch(wrong.body)
	if mu == nil || mw == nil || mu[1] != mw[1] {
		t.Errorf("unknown email and wrong password differ: %q vs %q", mu, mw)
	}

	// Without the form's token (another site's form): refused.
	if p := e.send("POST", "/login", "", url.Values{"email": {"owner@alpha.example"}, "password": {testPassword}}); p.status != http.StatusForbidden || sessionCookieSet(p) {
		t.Errorf("sign-in without csrf_token: %d", p.status)
	}
	token, c := e.loginForm()
	if p := e.send("POST", "/login", "", url.Values{"email": {"owner@alpha.example"}, "password": {testPassword},
		"csrf_token": {token + "x"}}, "Cookie", c.Name+"="+c.Value); p.status != http.StatusForbidden || sessionCookieSet(p) {
		t.Errorf("sign-in with a wrong csrf_token: %d", p.status)
	}

	p := e.postLogin(url.Values{"email": {"Owner@Alpha.example"}, "password": {testPassword}, "next": {"/settings"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/settings" {
		t.Fatalf("sign-in: %d %s", p.status, p.header.Get("Location"))
	}
	cookie := sessionOf(t, p)
	home := e.send("GET", "/", cookie, nil)
	if home.status != 200 || !strings.Contains(home.body, "owner@alpha.example") || !strings.Contains(home.body, `<span class="role"`) {
		t.Errorf("the header does not name the person and role: %d", home.status)
	}
	if strings.Contains(home.body, `class="orgswitch"`) {
		t.Error("a person of one organization sees the switcher")
	}
	log := e.send("GET", "/settings/audit?action=sign-in", cookie, nil)
	if log.status != 200 || !strings.Contains(log.body, "owner@alpha.example") {
		t.Errorf("the audit log lacks the sign-in: %d", log.status)
	}
}

func sessionCookieSet(p page) bool {
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == web.CookieName && c.Value != "" {
			return true
		}
	}
	return false
}

// totpCode computes the RFC 6238 code of secret (base32) at t.
func totpCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	key, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(secret))
	if err != nil {
		t.Fatalf("secret %q: %v", secret, err)
	}
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(at.Unix()/30))
	m := hmac.New(sha1.New, key)
	m.Write(msg[:])
	s := m.Sum(nil)
	o := s[len(s)-1] & 0x0f
	n := binary.BigEndian.Uint32(s[o:o+4]) & 0x7fffffff
	return fmt.Sprintf("%06d", n%1000000)
}

var stepRE = regexp.MustCompile(`name="step" value="([^"]+)"`)

// TestTOTPEnrolmentAndSignIn walks the account page's enrolment (secret,
// QR code, a wrong code shown again with the same secret, recovery codes
// once) and the sign-in's code step (a wrong code asks again, the right
// one signs in; the password is not in the page).
func TestTOTPEnrolmentAndSignIn(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "viewer@alpha.example", "viewer")
	cookie := e.signInAs("viewer@alpha.example")
	csrf := e.csrf(cookie)

	acc := e.send("GET", "/settings/account", cookie, nil)
	if acc.status != 200 || !strings.Contains(acc.body, `action="/settings/account/totp"`) {
		t.Fatalf("account page: %d %s", acc.status, acc.body)
	}
	begin := e.send("POST", "/settings/account/totp", cookie, url.Values{"csrf_token": {csrf}})
	m := regexp.MustCompile(`id="totp-secret" class="big">([A-Z2-7]+)<`).FindStringSubmatch(begin.body)
	if begin.status != 200 || m == nil || !strings.Contains(begin.body, `<svg class="qr"`) || !strings.Contains(begin.body, "otpauth://totp/") {
		t.Fatalf("enrolment page: %d %s", begin.status, begin.body)
	}
	secret := m[1]
	uri := regexp.MustCompile(`name="url" value="([^"]+)"`).FindStringSubmatch(begin.body)[1]
	wrong := e.send("POST", "/settings/account/totp/confirm", cookie, url.Values{"csrf_token": {csrf}, "code": {"000000"},
		"secret": {secret}, "url": {htmlUnescape(uri)}})
	if wrong.status != http.StatusUnprocessableEntity || !strings.Contains(wrong.body, secret) || !strings.Contains(wrong.body, `<svg class="qr"`) {
		t.Fatalf("a wrong code: %d, secret shown again: %v", wrong.status, strings.Contains(wrong.body, secret))
	}
	ok := e.send("POST", "/settings/account/totp/confirm", cookie, url.Values{"csrf_token": {csrf},
		"code": {totpCode(t, secret, e.clock.Now())}})
	codes := regexp.MustCompile(`<li><code>([0-9a-z]{5}-[0-9a-z]{5})</code></li>`).FindAllStringSubmatch(ok.body, -1)
	if ok.status != 200 || len(codes) != 10 {
		t.Fatalf("confirm: %d, %d recovery codes", ok.status, len(codes))
	}
	if again := e.send("GET", "/settings/account", cookie, nil); strings.Contains(again.body, codes[0][1]) || !strings.Contains(again.body, "Turn off") {
		t.Error("the account page shows the recovery codes again, or not that TOTP is on")
	}

	e.clock.Advance(time.Minute) // a code is good once: the next step's
	p := e.postLogin(url.Values{"email": {"viewer@alpha.example"}, "password": {testPassword}})
	step := stepRE.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || step == nil || !strings.Contains(p.body, `name="totp"`) || sessionCookieSet(p) {
		t.Fatalf("the code step: %d %s", p.status, p.body)
	}
	if strings.Contains(p.body, testPassword) {
		t.Error("the code step's page holds the password")
	}
	p = e.postLogin(url.Values{"step": {step[1]}, "totp": {"123456"}})
	step2 := stepRE.FindStringSubmatch(p.body)
	if p.status != http.StatusUnauthorized || step2 == nil || sessionCookieSet(p) {
		t.Fatalf("a wrong code: %d", p.status)
	}
	if p := e.postLogin(url.Values{"step": {step[1]}, "totp": {totpCode(t, secret, e.clock.Now())}}); p.status != http.StatusUnauthorized || sessionCookieSet(p) {
		t.Errorf("a used step token: %d", p.status)
	}
	p = e.postLogin(url.Values{"step": {step2[1]}, "totp": {totpCode(t, secret, e.clock.Now())}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("the right code: %d %s", p.status, p.body)
	}
	sessionOf(t, p)
	// A recovery code in the same field, all fields at once.
	p = e.postLogin(url.Values{"email": {"viewer@alpha.example"}, "password": {testPassword}, "totp": {codes[3][1]}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("a recovery code: %d %s", p.status, p.body)
	}
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#43;", "+", "&#61;", "=", "&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'").Replace(s)
}

var linkRE = regexp.MustCompile(`id="invite-link" class="big">([^<]+)<`)

// TestInvitation walks an owner's invitation: the link shown once on the
// people page, its page with password and password_confirm, a mismatch
// shown again, the person signed in, the link single use and expiring,
// and every bad link one 404 page.
func TestInvitation(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "owner@alpha.example", "owner")
	owner := e.signInAs("owner@alpha.example")
	csrf := e.csrf(owner)
	p := e.send("POST", "/settings/people", owner, url.Values{"csrf_token": {csrf}, "email": {"client@alpha.example"}, "role": {"viewer"}})
	m := linkRE.FindStringSubmatch(p.body)
	if p.status != 200 || m == nil {
		t.Fatalf("invite: %d %s", p.status, p.body)
	}
	link, err := url.Parse(m[1])
	if err != nil || !strings.HasPrefix(link.Path, "/invite/") {
		t.Fatalf("invitation link %q", m[1])
	}
	if list := e.send("GET", "/settings/people", owner, nil); strings.Contains(list.body, link.Path) || !strings.Contains(list.body, "client@alpha.example") {
		t.Error("the people page shows the link again, or not the invited person")
	}
	bad := e.send("POST", "/settings/people", owner, url.Values{"csrf_token": {csrf}, "email": {"client@alpha.example"}, "role": {"viewer"}})
	if bad.status != http.StatusConflict || errorRE.FindString(bad.body) == "" {
		t.Errorf("inviting a member again: %d", bad.status)
	}

	form := e.send("GET", link.Path, "", nil)
	for _, want := range []string{`name="password"`, `name="password_confirm"`, `name="csrf_token"`, "alpha", "client@alpha.example"} {
		if !strings.Contains(form.body, want) {
			t.Errorf("invitation page lacks %s: %d", want, form.status)
		}
	}
	token := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(form.body)[1]
	var formCookie string
	for _, c := range (&http.Response{Header: form.header}).Cookies() {
		if c.Name == "dmarcd_login" && strings.HasPrefix(link.Path, c.Path) {
			formCookie = c.Name + "=" + c.Value
		}
	}
	post := func(pw, confirm string) page {
		return e.send("POST", link.Path, "", url.Values{"csrf_token": {token}, "password": {pw}, "password_confirm": {confirm}}, "Cookie", formCookie)
	}
	if p := post("one long password", "another long password"); p.status != http.StatusUnprocessableEntity || sessionCookieSet(p) {
		t.Errorf("passwords that differ: %d", p.status)
	}
	if p := post("short", "short"); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "10") {
		t.Errorf("a short password: %d", p.status)
	}
	if p := e.send("POST", link.Path, "", url.Values{"password": {testPassword}, "password_confirm": {testPassword}}); p.status != http.StatusForbidden || sessionCookieSet(p) {
		t.Errorf("without csrf_token: %d", p.status)
	}
	p = post(testPassword, testPassword)
	if p.status != http.StatusSeeOther {
		t.Fatalf("accepting: %d %s", p.status, p.body)
	}
	viewer := sessionOf(t, p)
	if home := e.send("GET", "/", viewer, nil); !strings.Contains(home.body, "client@alpha.example") || !strings.Contains(home.body, ">viewer<") {
		t.Errorf("signed in after the invitation: %d", home.status)
	}
	used := e.send("GET", link.Path, "", nil)
	unknown := e.send("GET", "/invite/"+strings.Repeat("A", 43), "", nil)
	if used.status != 404 || unknown.status != 404 || strings.Contains(used.body, "client@alpha.example") ||
		errorTitle(used.body) != errorTitle(unknown.body) {
		t.Errorf("used and unknown links: %d %d (%q, %q)", used.status, unknown.status, errorTitle(used.body), errorTitle(unknown.body))
	}
	if p := post(testPassword, testPassword); p.status != 404 || sessionCookieSet(p) {
		t.Errorf("a used link posted again: %d", p.status)
	}

	// Expiry: 7 days.
	_, tok2, err := e.app.AddMember(app.Operator(e.orgA), "late@alpha.example", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(7*24*time.Hour + time.Minute)
	if p := e.send("GET", "/invite/"+tok2, "", nil); p.status != 404 {
		t.Errorf("an expired link: %d", p.status)
	}
}

var titleRE = regexp.MustCompile(`<h1>([^<]*)</h1>`)

func errorTitle(body string) string {
	if m := titleRE.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// writeForm finds a form that changes something: a POST form other than
// sign-out and the organization switcher.
var writeForm = regexp.MustCompile(`<form[^>]*method="post"[^>]*action="(/(?:[^"l]|l[^"o])[^"]*)"`)

func writeForms(body string) []string {
	var out []string
	for _, m := range writeForm.FindAllStringSubmatch(body, -1) {
		if m[1] != "/logout" && m[1] != "/orgs/switch" {
			out = append(out, m[1])
		}
	}
	return out
}

// TestRolesInPages ensures a viewer sees no write control on any page and
// is refused every write (changing nothing), an admin sees the people but
// no way to manage them, and an owner manages them.
func TestRolesInPages(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "owner@alpha.example", "owner")
	e.person(e.orgA, "admin@alpha.example", "admin")
	e.person(e.orgA, "viewer@alpha.example", "viewer")
	alert := storetestAlert(t, e)
	pages := []string{"/", "/domains/" + e.domA.ID, "/domains/" + e.domA.ID + "/sources", "/reports", "/alerts", "/tls-reports",
		"/settings", "/settings/keys", "/settings/webhooks", "/settings/mailboxes", "/settings/account", "/orgs"}

	viewer := e.signInAs("viewer@alpha.example")
	for _, path := range pages {
		p := e.send("GET", path, viewer, nil)
		if p.status != 200 {
			t.Errorf("viewer GET %s: %d", path, p.status)
			continue
		}
		if f := writeForms(p.body); len(f) > 0 && path != "/settings/account" {
			t.Errorf("viewer sees write forms on %s: %v", path, f)
		}
		if strings.Contains(p.body, `href="/domains/new"`) {
			t.Errorf("viewer sees Add a domain on %s", path)
		}
	}
	for _, path := range []string{"/settings/people", "/settings/audit", "/settings/quarantine"} {
		if p := e.send("GET", path, viewer, nil); p.status != http.StatusForbidden {
			t.Errorf("viewer GET %s: %d, want 403", path, p.status)
		}
	}
	csrf := e.csrf(viewer)
	before := e.send("GET", "/settings/keys", viewer, nil).body
	for _, path := range []string{"/domains", "/domains/" + e.domA.ID + "/delete", "/domains/" + e.domA.ID + "/verify",
		"/alerts/" + alert + "/dismiss", "/settings/keys", "/settings/keys/" + e.fullAID + "/revoke", "/settings/webhooks",
		"/settings/mailboxes", "/settings/people"} {
		p := e.send("POST", path, viewer, url.Values{"csrf_token": {csrf}, "name": {"x.example"}, "email": {"x@alpha.example"}, "role": {"owner"}})
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "your role (viewer)") || strings.Contains(p.body, "read-only key") {
			t.Errorf("viewer POST %s: %d, want 403 naming the role: %s", path, p.status, errorTitle(p.body))
		}
	}
	if after := e.send("GET", "/settings/keys", viewer, nil).body; after != before {
		t.Error("a viewer's refused POSTs changed the keys")
	}
	if _, err := e.db.FindDomain(e.orgA.ID, e.domA.ID); err != nil {
		t.Errorf("a viewer's refused delete removed the domain: %v", err)
	}

	admin := e.signInAs("admin@alpha.example")
	people := e.send("GET", "/settings/people", admin, nil)
	if people.status != 200 || !strings.Contains(people.body, "viewer@alpha.example") {
		t.Fatalf("admin's people page: %d", people.status)
	}
	if f := writeForms(people.body); len(f) > 0 {
		t.Errorf("admin sees people management: %v", f)
	}
	if p := e.send("POST", "/settings/people", admin, url.Values{"csrf_token": {e.csrf(admin)}, "email": {"x@alpha.example"}, "role": {"owner"}}); p.status != http.StatusForbidden {
		t.Errorf("admin invites: %d", p.status)
	}
	if keys := e.send("GET", "/settings/keys", admin, nil); len(writeForms(keys.body)) == 0 {
		t.Error("admin sees no key forms")
	}

	owner := e.signInAs("owner@alpha.example")
	people = e.send("GET", "/settings/people", owner, nil)
	id := regexp.MustCompile(`action="/settings/people/([^/]+)/role"[^>]*>(?:[^<]|<[^f])*?viewer@alpha\.example|/settings/people/([^/]+)/remove"><input type="hidden" name="csrf_token" value="[0-9a-f]+">\s*<p>viewer@alpha\.example`).FindStringSubmatch(people.body)
	if id == nil {
		t.Fatalf("owner's people page has no controls for the viewer: %s", people.body)
	}
	memberID := id[1] + id[2]
	ocsrf := e.csrf(owner)
	if p := e.send("POST", "/settings/people/"+memberID+"/role", owner, url.Values{"csrf_token": {ocsrf}, "role": {"admin"}}); p.status != http.StatusSeeOther {
		t.Fatalf("owner changes a role: %d %s", p.status, p.body)
	}
	if p := e.send("GET", "/", viewer, nil); p.status != http.StatusSeeOther {
		t.Errorf("the changed person's session lives on: %d", p.status)
	}
	if p := e.send("POST", "/settings/people/"+memberID+"/remove", owner, url.Values{"csrf_token": {ocsrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("owner removes a member: %d", p.status)
	}
	if p := e.send("GET", "/settings/people", owner, nil); strings.Contains(p.body, "viewer@alpha.example") {
		t.Error("the removed member is still listed")
	}
	log := e.send("GET", "/settings/audit?action=member.role", owner, nil)
	if !strings.Contains(log.body, "viewer@alpha.example") || strings.Contains(log.body, "<code>member.remove</code>") {
		t.Errorf("the audit filter by action: %s", log.body)
	}
}

// storetestAlert stores an open alert in organization A and returns its id.
func storetestAlert(t *testing.T, e *env) string {
	t.Helper()
	return mustAlertOf(t, e.db, e.domA, "warning", "an alert").ID
}

// TestOrganizationsOfAPerson ensures a person of several organizations
// gets the header's switcher and the operator view with each
// organization's domains, pass rate and open alerts; switching changes
// the organization every page shows; and an organization not theirs stays
// 404, from the switcher and by its ids.
func TestOrganizationsOfAPerson(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "msp@alpha.example", "owner")
	_, link, err := e.app.AddMember(app.Operator(e.orgB), "msp@alpha.example", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.app.AcceptInvitation("192.0.2.1", link, testPassword); err != nil {
		t.Fatal(err)
	}
	orgC := storetestOrg(t, e, "gamma")
	domC := storetestDomain(t, e, orgC.ID, "gamma.example")
	mustAlertOf(t, e.db, e.domB, "warning", "beta alert")

	cookie := e.signInAs("msp@alpha.example")
	home := e.send("GET", "/", cookie, nil)
	if !strings.Contains(home.body, `class="orgswitch"`) || !strings.Contains(home.body, ">beta</button>") || strings.Contains(home.body, "gamma") {
		t.Fatalf("switcher: %s", home.body)
	}
	orgs := e.send("GET", "/orgs", cookie, nil)
	for _, want := range []string{"alpha", "beta", "alpha.example", "beta.example", ">owner<", ">viewer<"} {
		if !strings.Contains(orgs.body, want) {
			t.Errorf("operator view lacks %q", want)
		}
	}
	if strings.Contains(orgs.body, "gamma") {
		t.Error("the operator view shows an organization of others")
	}
	if !regexp.MustCompile(`data-label="Open alerts" class="r"><strong>1</strong>`).MatchString(orgs.body) {
		t.Error("the operator view does not count beta's open alert")
	}

	csrf := e.csrf(cookie)
	p := e.send("POST", "/orgs/switch", cookie, url.Values{"csrf_token": {csrf}, "org": {e.orgB.ID}}, "Referer", e.srv.URL+"/alerts")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/alerts" {
		t.Fatalf("switch: %d %q", p.status, p.header.Get("Location"))
	}
	if home := e.send("GET", "/", cookie, nil); !strings.Contains(home.body, "beta.example") || strings.Contains(home.body, ">alpha.example</a>") {
		t.Errorf("after switching, the overview is not beta's: %s", home.body)
	}
	if p := e.send("GET", "/domains/"+e.domA.ID, cookie, nil); p.status != 404 {
		t.Errorf("alpha's domain while in beta: %d", p.status)
	}
	// A viewer in beta: no write form there.
	for _, path := range []string{"/", "/alerts", "/settings/keys"} {
		if f := writeForms(e.send("GET", path, cookie, nil).body); len(f) > 0 {
			t.Errorf("viewer in beta sees write forms on %s: %v", path, f)
		}
	}
	// gamma is not theirs: 404, and the session stays in beta.
	if p := e.send("POST", "/orgs/switch", cookie, url.Values{"csrf_token": {csrf}, "org": {orgC.ID}}); p.status != 404 {
		t.Errorf("switch to another's organization: %d", p.status)
	}
	for _, path := range []string{"/domains/" + domC.ID, "/domains/" + domC.ID + "/sources", "/domains/" + domC.ID + "/delete"} {
		if p := e.send("GET", path, cookie, nil); p.status != 404 {
			t.Errorf("GET %s of gamma: %d", path, p.status)
		}
	}
	if home := e.send("GET", "/", cookie, nil); !strings.Contains(home.body, "beta.example") {
		t.Error("a refused switch moved the session")
	}
	// A key's session has one organization: no switcher, no /orgs.
	key := e.signIn(e.fullA)
	if p := e.send("GET", "/", key, nil); strings.Contains(p.body, `class="orgswitch"`) {
		t.Error("a key's session shows the switcher")
	}
	if p := e.send("GET", "/orgs", key, nil); p.status != 404 {
		t.Errorf("/orgs for a key's session: %d", p.status)
	}
}

func storetestOrg(t *testing.T, e *env, name string) *store.Organization {
	t.Helper()
	o, err := e.db.CreateOrganization(name, store.PlanUnlimited)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func storetestDomain(t *testing.T, e *env, orgID, name string) *store.Domain {
	t.Helper()
	return storetest.MustDomain(t, e.db, orgID, name)
}

// TestAuditLogPage ensures the audit log page filters by actor, action
// and date and pages with its cursor, newest first.
func TestAuditLogPage(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "owner@alpha.example", "owner")
	owner := app.Operator(e.orgA)
	for i := range 60 {
		e.app.Audit(owner, "domain.create", fmt.Sprintf("d%02d.alpha.example", i), "198.51.100.9")
		e.clock.Advance(time.Second)
	}
	e.clock.Advance(48 * time.Hour)
	e.app.Audit(owner, "key.revoke", "late", "198.51.100.9")
	cookie := e.signInAs("owner@alpha.example")

	first := e.send("GET", "/settings/audit?action=domain.create", cookie, nil)
	rows := strings.Count(first.body, "<code>domain.create</code>")
	next := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(first.body)
	if first.status != 200 || rows != 50 || next == nil || !strings.Contains(first.body, "d59.alpha.example") || strings.Contains(first.body, "late") {
		t.Fatalf("first page: %d, %d rows, next %v", first.status, rows, next)
	}
	second := e.send("GET", htmlUnescape(next[1]), cookie, nil)
	if n := strings.Count(second.body, "<code>domain.create</code>"); n != 10 || !strings.Contains(second.body, "d00.alpha.example") ||
		strings.Contains(second.body, "d59.alpha.example") || strings.Contains(second.body, `rel="next"`) {
		t.Errorf("second page: %d rows", n)
	}
	day := e.clock.Now().UTC().Format(time.DateOnly)
	late := e.send("GET", "/settings/audit?from="+day, cookie, nil)
	if !strings.Contains(late.body, "late") || strings.Contains(late.body, "d59.alpha.example") {
		t.Error("the date filter")
	}
	who := e.send("GET", "/settings/audit?actor=owner@alpha.example", cookie, nil)
	if !strings.Contains(who.body, "<code>sign-in</code>") || strings.Contains(who.body, "domain.create</code>") {
		t.Error("the actor filter")
	}
	if bad := e.send("GET", "/settings/audit?from=yesterday", cookie, nil); bad.status != 200 || errorRE.FindString(bad.body) == "" {
		t.Errorf("a bad date: %d", bad.status)
	}
}

// TestInvitationOfAPersonWithAPassword ensures a link for a person who
// has a password asks for it (the link alone signs nobody in), and for
// their TOTP code when they enrolled one.
func TestInvitationOfAPersonWithAPassword(t *testing.T) {
	e := newEnv(t)
	e.person(e.orgA, "msp@alpha.example", "owner")
	secret, _, err := e.app.BeginTOTP(e.personActor(t, "msp@alpha.example"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.ConfirmTOTP(e.personActor(t, "msp@alpha.example"), totpCode(t, secret, e.clock.Now())); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	_, link, err := e.app.AddMember(app.Operator(e.orgB), "msp@alpha.example", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	form := e.send("GET", "/invite/"+link, "", nil)
	if form.status != 200 || strings.Contains(form.body, `name="password_confirm"`) || !strings.Contains(form.body, `autocomplete="current-password"`) {
		t.Fatalf("the link of a person with a password: %d %s", form.status, form.body)
	}
	token := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(form.body)[1]
	var cookie string
	for _, c := range (&http.Response{Header: form.header}).Cookies() {
		if c.Name == "dmarcd_login" {
			cookie = c.Name + "=" + c.Value
		}
	}
	post := func(v url.Values) page {
		v.Set("csrf_token", token)
		return e.send("POST", "/invite/"+link, "", v, "Cookie", cookie)
	}
	if p := post(url.Values{"password": {"not the password"}}); p.status != http.StatusUnauthorized || sessionCookieSet(p) {
		t.Errorf("a wrong password: %d", p.status)
	}
	p := post(url.Values{"password": {testPassword}})
	if p.status != 200 || !strings.Contains(p.body, `name="totp"`) || sessionCookieSet(p) {
		t.Fatalf("the right password of a person with TOTP: %d %s", p.status, p.body)
	}
	if p := post(url.Values{"password": {testPassword}, "totp": {"000000"}}); p.status == http.StatusSeeOther || sessionCookieSet(p) {
		t.Errorf("a wrong code: %d", p.status)
	}
	p = post(url.Values{"password": {testPassword}, "totp": {totpCode(t, secret, e.clock.Now())}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("password and code: %d %s", p.status, p.body)
	}
	if home := e.send("GET", "/", sessionOf(t, p), nil); !strings.Contains(home.body, ">beta</button>") && !strings.Contains(home.body, "beta") {
		t.Error("not signed in to beta")
	}
}

// personActor is the Actor of email's session, signed in with testPassword.
func (e *env) personActor(t *testing.T, email string) app.Actor {
	t.Helper()
	token, actor, err := e.app.SignInPassword("192.0.2.1", email, testPassword, "")
	if err != nil {
		t.Fatal(err)
	}
	_ = token
	return actor
}
