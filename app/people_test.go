package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

const testPassword = "correct horse battery"

// person adds email to org with role through the operator, accepts the
// invitation with testPassword, and returns the member, the session token
// and the Actor.
func (e *env) person(org *store.Organization, email, role string) (app.Member, string, app.Actor) {
	e.t.Helper()
	m, link, err := e.app.AddMember(app.Operator(org), email, role)
	if err != nil {
		e.t.Fatalf("AddMember %s: %v", email, err)
	}
	token, actor, err := e.app.AcceptInvitation("198.51.100.7", link, testPassword)
	if err != nil {
		e.t.Fatalf("AcceptInvitation %s: %v", email, err)
	}
	if actor.Org().ID != org.ID || actor.Email() != email {
		e.t.Fatalf("AcceptInvitation %s: signed in to %s as %q", email, actor.Org().Name, actor.Email())
	}
	return m, token, actor
}

// TestRolesOnEveryWrite ensures a viewer is refused every write (and
// changes nothing), an admin gets past the check on the organization's
// data but not on its people or existence, and an owner on everything
// but the operator's own operations.
func TestRolesOnEveryWrite(t *testing.T) {
	e := newEnv(t, nil)
	_, _, owner := e.person(e.alpha, "owner@example.com", "owner")
	_, _, admin := e.person(e.alpha, "admin@example.com", "admin")
	_, _, viewer := e.person(e.alpha, "viewer@example.com", "viewer")
	if owner.Role() != app.RoleOwner || admin.Role() != app.RoleAdmin || viewer.Role() != app.RoleViewer {
		t.Fatalf("roles: %v %v %v", owner.Role(), admin.Role(), viewer.Role())
	}
	if e.fullA.Role() != app.RoleAdmin || e.readA.Role() != app.RoleViewer || app.Operator(nil).Role() != app.RoleOwner {
		t.Fatalf("key and operator roles: %v %v", e.fullA.Role(), e.readA.Role())
	}
	before := e.state()
	for name, op := range e.writeOps() {
		wantKind(t, name+" by a viewer", op(viewer), app.Forbidden)
	}
	if after := e.state(); after != before {
		t.Fatalf("a viewer's refused operations changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	ownerOnly := map[string]bool{"SetPlan": true, "RenameOrganization": true, "DeleteOrganization": true}
	for name, op := range e.writeOps() {
		if name == "DeleteOrganization" || name == "RevokeKey" || name == "DeleteDomain" || name == "DeleteWebhook" {
			continue // run last, by the owner
		}
		err := op(admin)
		switch {
		case adminOps[name]:
			wantKind(t, name+" by an admin", err, app.Forbidden)
		case err != nil && app.KindOf(err) == app.Forbidden:
			t.Errorf("%s by an admin refused: %v", name, err)
		}
	}
	for name, op := range e.writeOps() {
		if name == "DeleteOrganization" {
			continue
		}
		err := op(owner)
		switch {
		case name == "CreateOrganization":
			wantKind(t, name+" by an owner", err, app.Forbidden)
		case ownerOnly[name] && err != nil:
			t.Errorf("%s by an owner: %v", name, err)
		case err != nil && app.KindOf(err) == app.Forbidden:
			t.Errorf("%s by an owner refused: %v", name, err)
		}
	}
	// People: owners only; keys never.
	for who, a := range map[string]app.Actor{"admin": admin, "viewer": viewer, "full key": e.fullA, "read key": e.readA} {
		_, _, err := e.app.AddMember(a, "new@example.com", "viewer")
		wantKind(t, "AddMember by "+who, err, app.Forbidden)
	}
	for who, a := range map[string]app.Actor{"viewer": viewer, "read key": e.readA} {
		_, err := e.app.Members(a)
		wantKind(t, "Members by "+who, err, app.Forbidden)
		_, err = e.app.AuditLog(a, app.AuditFilter{})
		wantKind(t, "AuditLog by "+who, err, app.Forbidden)
	}
	for who, a := range map[string]app.Actor{"admin": admin, "owner": owner, "full key": e.fullA} {
		if ms, err := e.app.Members(a); err != nil || len(ms) != 3 {
			t.Errorf("Members by %s: %d, %v", who, len(ms), err)
		}
	}
	if _, err := e.app.DeleteOrganization(context.Background(), admin); app.KindOf(err) != app.Forbidden {
		t.Errorf("DeleteOrganization by an admin: %v", err)
	}
	if _, err := e.app.DeleteOrganization(context.Background(), owner); err != nil {
		t.Errorf("DeleteOrganization by an owner: %v", err)
	}
	if _, err := e.db.FindAccountByEmail("owner@example.com"); err != nil {
		t.Errorf("the account went with the organization: %v", err)
	}
	if ms, _, _ := e.db.AccountMemberships(owner.Person().ID); len(ms) != 0 {
		t.Errorf("memberships outlived their organization: %d", len(ms))
	}
}

// TestPasswordSignIn covers the sign-in: right password, wrong one,
// unknown email (one message), TOTPRequired, and the limits per address
// and per account.
func TestPasswordSignIn(t *testing.T) {
	e := newEnv(t, func(c *app.Config) { c.AuthFailLimit, c.AccountFailLimit = 5, 3 })
	e.person(e.alpha, "ann@example.com", "admin")
	token, actor, err := e.app.SignInPassword("203.0.113.1", "Ann@Example.com ", testPassword, "")
	if err != nil || actor.Email() != "ann@example.com" || actor.Role() != app.RoleAdmin {
		t.Fatalf("sign-in: %v %+v", err, actor)
	}
	if got, _, err := e.app.Session(token); err != nil || got.Email() != "ann@example.com" || got.Key() != nil {
		t.Fatalf("Session: %v %+v", err, got)
	}
	_, _, wrong := e.app.SignInPassword("203.0.113.2", "ann@example.com", "not the password", "")
	_, _, unknown := e.app.SignInPassword("203.0.113.3", "nobody@example.com", "not the password", "")
	wantKind(t, "wrong password", wrong, app.Unauthenticated)
	wantKind(t, "unknown email", unknown, app.Unauthenticated)
	if wrong == nil || unknown == nil || wrong.Error() != unknown.Error() {
		t.Errorf("the messages tell the cases apart: %v / %v", wrong, unknown)
	}
	// Per account: 3 failures (one above) from different addresses.
	for i := range 2 {
		_, _, err := e.app.SignInPassword("203.0.113."+string(rune('4'+i)), "ann@example.com", "nope nope nope", "")
		wantKind(t, "failure", err, app.Unauthenticated)
	}
	_, _, err = e.app.SignInPassword("203.0.113.9", "ann@example.com", testPassword, "")
	wantKind(t, "the right password past the account's limit", err, app.Throttled)
	// The same limit for an unknown email: no enumeration by lock-out.
	for range 3 {
		e.app.SignInPassword("203.0.113.10", "ghost@example.com", "x", "")
	}
	_, _, err = e.app.SignInPassword("203.0.113.11", "ghost@example.com", "x", "")
	wantKind(t, "an unknown email past the limit", err, app.Throttled)
	e.clock.Advance(16 * time.Minute)
	if _, _, err := e.app.SignInPassword("203.0.113.9", "ann@example.com", testPassword, ""); err != nil {
		t.Errorf("after the window: %v", err)
	}
	// Per address: 5 failures from one address, any emails.
	for i := range 5 {
		e.app.SignInPassword("203.0.113.50", "x"+string(rune('a'+i))+"@example.com", "x", "")
	}
	_, _, err = e.app.SignInPassword("203.0.113.50", "ann@example.com", testPassword, "")
	wantKind(t, "the right password from an address past its limit", err, app.Throttled)
}

// TestKeySignInCanBeOff ensures --web-key-sign-in=false refuses SignIn
// with a key, and the API's Authenticate still takes it.
func TestKeySignInCanBeOff(t *testing.T) {
	e := newEnv(t, func(c *app.Config) { c.DisableKeySignIn = true })
	_, _, err := e.app.SignIn("192.0.2.9", e.readSecret)
	wantKind(t, "key sign-in turned off", err, app.Forbidden)
	if _, err := e.app.Authenticate("192.0.2.9", e.readSecret); err != nil {
		t.Errorf("Authenticate: %v", err)
	}
}

// TestInvitations ensures a link works once, expires after 7 days, and
// that a password shorter than the rule is refused without using it.
func TestInvitations(t *testing.T) {
	e := newEnv(t, nil)
	_, link, err := e.app.AddMember(app.Operator(e.alpha), "bob@example.com", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.app.Invitation(link)
	if err != nil || v.Email != "bob@example.com" || v.OrgName != "alpha" || !v.NeedsPassword ||
		!v.ExpiresAt.Equal(e.clock.Now().Add(app.InvitationTTL).Truncate(time.Second)) {
		t.Fatalf("Invitation: %+v %v", v, err)
	}
	_, _, err = e.app.AcceptInvitation("192.0.2.3", link, "short")
	wantKind(t, "a short password", err, app.Invalid)
	if _, _, err := e.app.AcceptInvitation("192.0.2.3", link, testPassword); err != nil {
		t.Fatalf("accept: %v", err)
	}
	_, _, err = e.app.AcceptInvitation("192.0.2.3", link, testPassword)
	wantKind(t, "the link again", err, app.NotFound)
	_, err = e.app.Invitation(link)
	wantKind(t, "the used link's page", err, app.NotFound)

	_, link2, err := e.app.AddMember(app.Operator(e.beta), "bob@example.com", "admin")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.app.Invitation(link2); err != nil || v.NeedsPassword {
		t.Errorf("an invitation for an account with a password: %+v %v", v, err)
	}
	e.clock.Advance(app.InvitationTTL)
	_, _, err = e.app.AcceptInvitation("192.0.2.3", link2, "")
	wantKind(t, "an expired link", err, app.NotFound)
	_, _, err = e.app.AddMember(app.Operator(e.beta), "bob@example.com", "viewer")
	wantKind(t, "a member twice", err, app.Conflict)
	_, _, err = e.app.AddMember(app.Operator(e.beta), "not an address", "boss")
	wantKind(t, "bad email and role", err, app.Invalid)
	if ae := app.AsError(err); len(ae.Fields) != 2 {
		t.Errorf("fields: %+v", ae.Fields)
	}
}

// TestSessionsEnd ensures a role change, a removal and a password reset
// end the person's sessions at once, and that the last owner stays.
func TestSessionsEnd(t *testing.T) {
	e := newEnv(t, nil)
	ownerM, _, owner := e.person(e.alpha, "owner@example.com", "owner")
	m, token, _ := e.person(e.alpha, "carol@example.com", "admin")
	if _, err := e.app.SetRole(owner, m.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.app.Session(token)
	wantKind(t, "the session after a role change", err, app.Unauthenticated)
	token, actor, err := e.app.SignInPassword("192.0.2.4", "carol@example.com", testPassword, "")
	if err != nil || actor.Role() != app.RoleViewer {
		t.Fatalf("sign-in after the change: %v %v", err, actor.Role())
	}
	reset, err := e.app.ResetPassword(owner, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.app.Session(token)
	wantKind(t, "the session after a reset", err, app.Unauthenticated)
	if _, _, err := e.app.AcceptInvitation("192.0.2.4", reset, "a new password here"); err != nil {
		t.Fatalf("using the reset link: %v", err)
	}
	_, _, err = e.app.SignInPassword("192.0.2.4", "carol@example.com", testPassword, "")
	wantKind(t, "the old password", err, app.Unauthenticated)
	token, _, err = e.app.SignInPassword("192.0.2.4", "carol@example.com", "a new password here", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.RemoveMember(owner, m.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.app.Session(token)
	wantKind(t, "the session after removal", err, app.Unauthenticated)
	_, _, err = e.app.SignInPassword("192.0.2.4", "carol@example.com", "a new password here", "")
	wantKind(t, "a person of no organization", err, app.Forbidden)

	_, err = e.app.SetRole(owner, ownerM.ID, "admin")
	wantKind(t, "demoting the last owner", err, app.Conflict)
	_, err = e.app.RemoveMember(owner, ownerM.ID)
	wantKind(t, "removing the last owner", err, app.Conflict)
	// Another organization's member is not found.
	bm, _, _ := e.person(e.beta, "dan@example.com", "viewer")
	_, err = e.app.RemoveMember(owner, bm.ID)
	wantKind(t, "removing beta's member from alpha", err, app.NotFound)
	_, err = e.app.SetRole(owner, bm.ID, "owner")
	wantKind(t, "promoting beta's member from alpha", err, app.NotFound)
	_, err = e.app.ResetPassword(owner, bm.ID)
	wantKind(t, "resetting beta's member from alpha", err, app.NotFound)
}

// TestSwitchOrganization ensures a person in two organizations switches
// between them with their role in each, and that another one is 404.
func TestSwitchOrganization(t *testing.T) {
	e := newEnv(t, nil)
	e.person(e.alpha, "eve@example.com", "viewer")
	_, link, err := e.app.AddMember(app.Operator(e.beta), "eve@example.com", "owner")
	if err != nil {
		t.Fatal(err)
	}
	// Pending in beta until she uses the link: no access there yet.
	_, actor, err := e.app.SignInPassword("192.0.2.5", "eve@example.com", testPassword, "")
	if err != nil {
		t.Fatal(err)
	}
	if orgs, _ := e.app.Organizations(actor); len(orgs) != 1 {
		t.Fatalf("a pending membership gives access: %d organizations", len(orgs))
	}
	v, err := e.app.Invitation(link)
	if err != nil || !v.CurrentPassword || v.NeedsPassword {
		t.Fatalf("the link of a person with a password: %+v %v", v, err)
	}
	_, _, err = e.app.AcceptInvitation("192.0.2.5", link, "not her password")
	wantKind(t, "the link with a wrong password", err, app.Unauthenticated)
	if _, actor, err = e.app.AcceptInvitation("192.0.2.5", link, testPassword); err != nil || actor.Org().ID != e.beta.ID {
		t.Fatalf("the link with her password: %v", err)
	}
	token, actor, err := e.app.SignInPassword("192.0.2.5", "eve@example.com", testPassword, "")
	if err != nil || actor.Org().Name != "alpha" {
		t.Fatalf("sign-in: %v, in %v", err, actor.Org())
	}
	orgs, err := e.app.Organizations(actor)
	if err != nil || len(orgs) != 2 || orgs[0].Org.Name != "alpha" || orgs[1].Role != app.RoleOwner {
		t.Fatalf("Organizations: %+v %v", orgs, err)
	}
	actor, err = e.app.SwitchOrganization(token, e.beta.ID)
	if err != nil || actor.Org().ID != e.beta.ID || actor.Role() != app.RoleOwner {
		t.Fatalf("switch to beta: %v %+v", err, actor)
	}
	if got, _, err := e.app.Session(token); err != nil || got.Org().ID != e.beta.ID {
		t.Fatalf("the session after the switch: %v %v", err, got.Org())
	}
	_, err = e.app.SwitchOrganization(token, e.gamma.ID)
	wantKind(t, "switching to gamma", err, app.NotFound)
	_, err = e.app.SwitchOrganization(token, store.NewID())
	wantKind(t, "switching to no organization", err, app.NotFound)
}

// TestAuditEntries ensures the operations write the log with who, what,
// target and address, and that filters and pages work.
func TestAuditEntries(t *testing.T) {
	e := newEnv(t, nil)
	_, _, owner := e.person(e.alpha, "owner@example.com", "owner")
	ctx := context.Background()
	owner = owner.WithAddr("192.0.2.77")
	d, _, err := e.app.CreateDomain(ctx, owner, "audited.example")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.DeleteDomain(ctx, owner, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.app.CreateKey(ctx, e.fullA, "k", "read"); err != nil {
		t.Fatal(err)
	}
	e.app.SignInPassword("192.0.2.78", "owner@example.com", "wrong password!", "")
	e.app.SignInPassword("192.0.2.78", "stranger@example.com", "wrong password!", "")
	page, err := e.app.AuditLog(owner, app.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range page.Entries {
		got = append(got, en.Actor+" "+en.Action+" "+en.Target+" "+en.IP)
	}
	want := []string{
		"owner@example.com sign-in.fail owner@example.com 192.0.2.78",
		"key:" + e.fullA.Key().Prefix + " key.create ",
		"owner@example.com domain.delete audited.example 192.0.2.77",
		"owner@example.com domain.create audited.example 192.0.2.77",
		"owner@example.com invitation.accept owner@example.com 198.51.100.7",
		"operator member.add owner@example.com as owner ",
	}
	if len(got) != len(want) {
		t.Fatalf("entries:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("entry %d: %q, want %q", i, got[i], want[i])
		}
	}
	for _, g := range got {
		if strings.Contains(g, "stranger") {
			t.Errorf("an unknown email was written: %q", g)
		}
	}
	p1, err := e.app.AuditLog(owner, app.AuditFilter{Limit: 2, Actor: "owner@example.com"})
	if err != nil || len(p1.Entries) != 2 || p1.NextCursor == "" {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, err := e.app.AuditLog(owner, app.AuditFilter{Limit: 2, Actor: "owner@example.com", Cursor: p1.NextCursor})
	if err != nil || len(p2.Entries) != 2 || p2.Entries[0].Action != "domain.create" || p2.NextCursor != "" {
		t.Fatalf("page 2: %+v %v", p2.Entries, err)
	}
	p3, err := e.app.AuditLog(owner, app.AuditFilter{Action: "domain.create"})
	if err != nil || len(p3.Entries) != 1 {
		t.Fatalf("action filter: %+v %v", p3, err)
	}
	_, err = e.app.AuditLog(owner, app.AuditFilter{Cursor: "garbage"})
	wantKind(t, "a bad cursor", err, app.Invalid)
	e.clock.Advance(401 * 24 * time.Hour)
	if n, err := e.app.SweepAudit(400 * 24 * time.Hour); err != nil || n != len(want) {
		t.Errorf("SweepAudit: %d, %v", n, err)
	}
}

// TestOperatorView sums each organization's domains over 30 days.
func TestOperatorView(t *testing.T) {
	e := newEnv(t, nil)
	_, _, viewer := e.person(e.alpha, "v@example.com", "viewer")
	ov, err := e.app.OperatorView(viewer)
	if err != nil || len(ov) != 1 || ov[0].Org.ID != e.alpha.ID || len(ov[0].Domains) != 1 || ov[0].Domains[0].Domain.Name != "alpha.example" {
		t.Fatalf("OperatorView: %+v %v", ov, err)
	}
	all, err := e.app.OperatorView(app.Operator(nil))
	if err != nil || len(all) != 3 {
		t.Fatalf("the operator's view: %d %v", len(all), err)
	}
}

// TestTOTPSignIn enrols TOTP, then signs in with a code (once: reuse is
// refused), with a recovery code (once), and turns it off.
func TestTOTPSignIn(t *testing.T) {
	e := newEnv(t, nil)
	_, _, actor := e.person(e.alpha, "tia@example.com", "viewer")
	secret, url, err := e.app.BeginTOTP(actor)
	if err != nil || !strings.HasPrefix(url, "otpauth://totp/dmarcd:tia@example.com?") || !strings.Contains(url, "secret="+secret) {
		t.Fatalf("BeginTOTP: %q %v", url, err)
	}
	_, err = e.app.ConfirmTOTP(actor, "000000")
	wantKind(t, "a wrong confirmation", err, app.Invalid)
	codes, err := e.app.ConfirmTOTP(actor, app.TOTPCode(secret, e.clock.Now()))
	if err != nil || len(codes) != 10 {
		t.Fatalf("ConfirmTOTP: %v %v", codes, err)
	}
	_, _, err = e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, "")
	wantKind(t, "no code", err, app.TOTPRequired)
	_, _, err = e.app.SignInPassword("192.0.2.6", "tia@example.com", "wrong password!", "")
	wantKind(t, "a wrong password (no word of TOTP)", err, app.Unauthenticated)
	_, _, err = e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, app.TOTPCode(secret, e.clock.Now()))
	wantKind(t, "the confirmation's code again", err, app.Unauthenticated)
	e.clock.Advance(30 * time.Second)
	code := app.TOTPCode(secret, e.clock.Now())
	if _, _, err := e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, code); err != nil {
		t.Fatalf("with the code: %v", err)
	}
	_, _, err = e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, code)
	wantKind(t, "a code reused", err, app.Unauthenticated)
	if _, _, err := e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, strings.ToUpper(codes[3])); err != nil {
		t.Fatalf("with a recovery code: %v", err)
	}
	_, _, err = e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, codes[3])
	wantKind(t, "a recovery code reused", err, app.Unauthenticated)
	if err := e.app.DisableTOTP(actor, codes[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.app.SignInPassword("192.0.2.6", "tia@example.com", testPassword, ""); err != nil {
		t.Errorf("after DisableTOTP: %v", err)
	}
	_, _, err = e.app.BeginTOTP(e.fullA)
	wantKind(t, "BeginTOTP for a key", err, app.Forbidden)

	// A link of another organization asks for the code too.
	secret, _, err = e.app.BeginTOTP(actor)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.ConfirmTOTP(actor, app.TOTPCode(secret, e.clock.Now())); err != nil {
		t.Fatal(err)
	}
	_, link, err := e.app.AddMember(app.Operator(e.beta), "tia@example.com", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.app.AcceptInvitation("192.0.2.6", link, testPassword)
	wantKind(t, "a link without the code", err, app.TOTPRequired)
	e.clock.Advance(30 * time.Second)
	if _, actor, err := e.app.AcceptInvitation("192.0.2.6", link, testPassword, app.TOTPCode(secret, e.clock.Now())); err != nil || actor.Org().ID != e.beta.ID {
		t.Errorf("the link with the code: %v", err)
	}
}

// TestSignInOIDC: a verified email of an account signs in and accepts its
// invitation; unverified and unknown are refused.
func TestSignInOIDC(t *testing.T) {
	e := newEnv(t, nil)
	_, link, err := e.app.AddMember(app.Operator(e.alpha), "sso@example.com", "admin")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.app.SignInOIDC("192.0.2.8", "sso@example.com", false)
	wantKind(t, "unverified", err, app.Unauthenticated)
	_, _, err = e.app.SignInOIDC("192.0.2.8", "who@example.com", true)
	wantKind(t, "unknown", err, app.Unauthenticated)
	_, actor, err := e.app.SignInOIDC("192.0.2.8", "SSO@example.com", true)
	if err != nil || actor.Role() != app.RoleAdmin || actor.Org().ID != e.alpha.ID {
		t.Fatalf("SignInOIDC: %v %+v", err, actor)
	}
	_, err = e.app.Invitation(link)
	wantKind(t, "the invitation after SSO", err, app.NotFound)
}

// TestPersonNotFoundAcrossOrganizations: an owner of gamma finds nothing
// of alpha's, and changes nothing there.
func TestPersonNotFoundAcrossOrganizations(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, _, owner := e.person(e.gamma, "g@example.com", "owner")
	am, _, _ := e.person(e.alpha, "a@example.com", "owner")
	before := e.state()
	wantKind(t, "deleting alpha's domain", e.app.DeleteDomain(ctx, owner, e.domA.ID), app.NotFound)
	_, err := e.app.FindWebhook(ctx, owner, e.hookA.ID)
	wantKind(t, "reading alpha's webhook", err, app.NotFound)
	_, err = e.app.RevokeKey(ctx, owner, e.keyAlph)
	wantKind(t, "revoking alpha's key", err, app.NotFound)
	_, err = e.app.RemoveMember(owner, am.ID)
	wantKind(t, "removing alpha's member", err, app.NotFound)
	if after := e.state(); after != before {
		t.Fatalf("changed:\n%s\n%s", before, after)
	}
	if ms, _ := e.app.Members(owner); len(ms) != 1 || ms[0].Email != "g@example.com" {
		t.Errorf("gamma's members: %+v", ms)
	}
}

// TestAuditOfEachAction runs each audited operation once and finds its
// entry.
func TestAuditOfEachAction(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, _, owner := e.person(e.alpha, "owner@example.com", "owner")
	m, _, viewer := e.person(e.alpha, "viewer@example.com", "viewer")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	hook, _, err := e.app.CreateWebhook(ctx, owner, "https://hooks.example.com/audit", "audit")
	must(err)
	must(e.app.DeleteWebhook(ctx, owner, hook.ID))
	key, _, err := e.app.CreateKey(ctx, owner, "temp", "read")
	must(err)
	_, err = e.app.RevokeKey(ctx, owner, key.ID)
	must(err)
	al, err := e.db.RecordDNSCheck(store.DNSCheck{DomainID: e.domA.ID, Seen: e.domA.LastDNSRecord, Record: e.domA.LastDNSRecord,
		Alert: &alert.Candidate{Type: alert.TypeDNSRecordChanged, Severity: alert.SeverityWarning, Title: "t", Message: "m",
			Details: json.RawMessage(`{}`)}})
	must(err)
	_, err = e.app.DismissAlert(ctx, owner, al.ID)
	must(err)
	secret, _, err := e.app.BeginTOTP(viewer)
	must(err)
	_, err = e.app.ConfirmTOTP(viewer, app.TOTPCode(secret, e.clock.Now()))
	must(err)
	_, err = e.app.SetRole(owner, m.ID, "admin")
	must(err)
	_, err = e.app.ResetPassword(owner, m.ID)
	must(err)
	_, err = e.app.RemoveMember(owner, m.ID)
	must(err)
	_, _, err = e.app.SignIn("192.0.2.50", e.readSecret)
	must(err)
	page, err := e.app.AuditLog(owner, app.AuditFilter{Limit: 500})
	must(err)
	got := map[string]string{}
	for _, en := range page.Entries {
		got[en.Action] = en.Actor + " " + en.Target
	}
	want := map[string]string{
		"webhook.create": "owner@example.com https://hooks.example.com/audit",
		"webhook.delete": "owner@example.com https://hooks.example.com/audit",
		"key.create":     "owner@example.com " + key.Prefix + " temp",
		"key.revoke":     "owner@example.com " + key.Prefix + " temp",
		"totp.enable":    "viewer@example.com viewer@example.com",
		"member.role":    "owner@example.com viewer@example.com to admin",
		"member.reset":   "owner@example.com viewer@example.com",
		"member.remove":  "owner@example.com viewer@example.com",
		"sign-in":        "key:" + e.readA.Key().Prefix + " key:" + e.readA.Key().Prefix,
	}
	want["alert.dismiss"] = "owner@example.com " + al.ID
	for action, w := range want {
		if got[action] != w {
			t.Errorf("%s: %q, want %q", action, got[action], w)
		}
	}
}

// TestLinksDoNotCrossOrganizations: a link made by one organization's
// owner never signs its holder in as a person of other organizations.
func TestLinksDoNotCrossOrganizations(t *testing.T) {
	e := newEnv(t, nil)
	_, _, ownerG := e.person(e.gamma, "g@example.com", "owner")
	e.person(e.alpha, "shared@example.com", "admin")
	// gamma's owner invites alpha's admin: the link needs her password.
	m, link, err := e.app.AddMember(ownerG, "shared@example.com", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = e.app.AcceptInvitation("192.0.2.9", link, "a password of my choice")
	wantKind(t, "gamma's owner using the link", err, app.Unauthenticated)
	// Nor may gamma's owner reset her password: she is alpha's too.
	_, err = e.app.ResetPassword(ownerG, m.ID)
	wantKind(t, "gamma's owner resetting alpha's admin", err, app.Forbidden)
	if _, err := e.app.ResetPassword(app.Operator(e.gamma), m.ID); err != nil {
		t.Errorf("the operator's reset: %v", err)
	}
	// A person of single sign-on only accepts by signing in that way.
	_, l2, err := e.app.AddMember(app.Operator(e.alpha), "sso@example.com", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.app.SignInOIDC("192.0.2.9", "sso@example.com", true); err != nil {
		t.Fatal(err)
	}
	_, l3, err := e.app.AddMember(ownerG, "sso@example.com", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := e.app.Invitation(l3); err != nil || !v.SingleSignOn || v.NeedsPassword {
		t.Errorf("the link of a person of single sign-on: %+v %v", v, err)
	}
	_, _, err = e.app.AcceptInvitation("192.0.2.9", l3, "a password of my choice")
	wantKind(t, "setting a password through gamma's link", err, app.Forbidden)
	_, err = e.app.Invitation(l2)
	wantKind(t, "alpha's link after single sign-on", err, app.NotFound)
	ms, _ := e.app.Members(ownerG)
	for _, mm := range ms {
		if mm.Email == "sso@example.com" && !mm.Pending {
			t.Error("gamma's invitation is not pending")
		}
	}
}
