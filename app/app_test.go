package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
	"github.com/dmarcd/dmarcd/webhook"
)

// env is an App over a real store and a real DNS server, with three
// organizations: alpha (unlimited: a full and a read key, a domain and a
// webhook), beta (starter) and gamma (business), each with a full key.
type env struct {
	t                   *testing.T
	app                 *app.App
	db                  *store.DB
	dns                 *dnstest.Server
	clock               *storetest.Clock
	alpha, beta, gamma  *store.Organization
	fullA, readA        app.Actor
	fullB, fullC        app.Actor
	domA                *store.Domain
	hookA               *store.Webhook
	readSecret, keyAlph string // the read key's secret; the id of the full key
}

func newEnv(t *testing.T, mod func(*app.Config)) *env {
	t.Helper()
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ns.SetA("hooks.example.com", "93.184.216.34")
	cfg := app.Config{Store: db, DNS: &dnscheck.Checker{Resolver: res, SuggestTimeout: time.Second},
		ReportingDomain: "reports.test", DNSTimeout: 2 * time.Second, Now: clock.Now,
		WebhookResolver: res, WebhookClient: webhook.NewClient(res, egress.Policy{})}
	if mod != nil {
		mod(&cfg)
	}
	e := &env{t: t, app: app.New(cfg), db: db, dns: ns, clock: clock}
	e.alpha = storetest.MustOrganization(t, db, "alpha", store.PlanUnlimited)
	e.beta = storetest.MustOrganization(t, db, "beta", store.PlanStarter)
	e.gamma = storetest.MustOrganization(t, db, "gamma", store.PlanBusiness)
	var full string
	var k *store.APIKey
	k, full = storetest.MustAPIKey(t, db, e.alpha.ID, store.ScopeFull)
	e.keyAlph = k.ID
	_, e.readSecret = storetest.MustAPIKey(t, db, e.alpha.ID, store.ScopeRead)
	e.fullA, e.readA = e.signIn(full), e.signIn(e.readSecret)
	_, full = storetest.MustAPIKey(t, db, e.beta.ID, store.ScopeFull)
	e.fullB = e.signIn(full)
	_, full = storetest.MustAPIKey(t, db, e.gamma.ID, store.ScopeFull)
	e.fullC = e.signIn(full)
	e.domA = storetest.MustDomain(t, db, e.alpha.ID, "alpha.example")
	e.hookA = &store.Webhook{OrgID: e.alpha.ID, URL: "https://hooks.example.com/a", Name: "a"}
	if err := db.CreateWebhook(e.hookA, store.WebhookSecret(webhook.NewSecret())); err != nil {
		t.Fatal(err)
	}
	return e
}

// signIn is the Actor of an API key.
func (e *env) signIn(secret string) app.Actor {
	e.t.Helper()
	a, err := e.app.Authenticate("192.0.2.1", secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// wantKind fails the test unless err is of kind k.
func wantKind(t *testing.T, what string, err error, k app.Kind) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, k)
		return
	}
	if got := app.KindOf(err); got != k {
		t.Errorf("%s: %s (%v), want %s", what, got, err, k)
	}
}

// writeOps are every operation that changes something, run by actor.
func (e *env) writeOps() map[string]func(app.Actor) error {
	ctx := context.Background()
	name, url := "x", "https://hooks.example.com/x"
	return map[string]func(app.Actor) error{
		"CreateDomain": func(a app.Actor) error { _, _, err := e.app.CreateDomain(ctx, a, "new.example"); return err },
		"VerifyDomain": func(a app.Actor) error { _, err := e.app.VerifyDomain(ctx, a, e.domA.ID); return err },
		"DeleteDomain": func(a app.Actor) error { return e.app.DeleteDomain(ctx, a, e.domA.ID) },
		"CreateWebhook": func(a app.Actor) error {
			_, _, err := e.app.CreateWebhook(ctx, a, url, name, "")
			return err
		},
		"UpdateWebhook": func(a app.Actor) error {
			_, err := e.app.UpdateWebhook(ctx, a, e.hookA.ID, app.WebhookUpdate{Name: &name})
			return err
		},
		"DeleteWebhook": func(a app.Actor) error { return e.app.DeleteWebhook(ctx, a, e.hookA.ID) },
		"TestWebhook":   func(a app.Actor) error { _, err := e.app.TestWebhook(ctx, a, store.NewID()); return err },
		"CreateKey":     func(a app.Actor) error { _, _, err := e.app.CreateKey(ctx, a, "k", "full"); return err },
		"RevokeKey":     func(a app.Actor) error { _, err := e.app.RevokeKey(ctx, a, e.keyAlph); return err },
		"CreateMailbox": func(a app.Actor) error {
			_, err := e.app.CreateMailbox(ctx, a, app.MailboxSpec{Host: &name, Username: &name, Password: &name})
			return err
		},
		"UpdateMailbox": func(a app.Actor) error {
			_, err := e.app.UpdateMailbox(ctx, a, store.NewID(), app.MailboxSpec{})
			return err
		},
		"DeleteMailbox": func(a app.Actor) error { return e.app.DeleteMailbox(ctx, a, store.NewID()) },
		"PollMailbox":   func(a app.Actor) error { _, err := e.app.PollMailbox(ctx, a, store.NewID()); return err },
		"RetryQuarantine": func(a app.Actor) error {
			_, err := e.app.RetryQuarantine(ctx, a, store.NewID())
			return err
		},
		"DeleteQuarantine": func(a app.Actor) error { return e.app.DeleteQuarantine(ctx, a, store.NewID()) },
		"DismissAlert":     func(a app.Actor) error { _, err := e.app.DismissAlert(ctx, a, store.NewID()); return err },
		"DismissAlerts": func(a app.Actor) error {
			_, err := e.app.DismissAlerts(ctx, a, []string{store.NewID()})
			return err
		},
		"CreateOrganization": func(a app.Actor) error {
			_, err := e.app.CreateOrganization(ctx, a, "delta", store.PlanStarter)
			return err
		},
		"SetPlan":            func(a app.Actor) error { _, err := e.app.SetPlan(ctx, a, store.PlanStarter); return err },
		"RenameOrganization": func(a app.Actor) error { _, err := e.app.RenameOrganization(ctx, a, "omega"); return err },
		"DeleteOrganization": func(a app.Actor) error { _, err := e.app.DeleteOrganization(ctx, a); return err },
		"SetNotifications": func(a app.Actor) error {
			_, err := e.app.SetNotifications(ctx, a, []store.NotificationRecipient{{Email: "x@example.org"}})
			return err
		},
		"SetNotificationFor": func(a app.Actor) error {
			_, err := e.app.SetNotificationFor(ctx, a, "x@example.org", store.NotificationRecipient{Digest: "daily"})
			return err
		},
		"QueueMail": func(a app.Actor) error {
			_, err := e.app.QueueMail(ctx, a, &store.OutgoingMail{Kind: store.MailKindDigest, To: "x@example.org", Subject: "s", Text: "t"})
			return err
		},
		"SendTestMail": func(a app.Actor) error { _, err := e.app.SendTestMail(ctx, a, "x@example.org"); return err },
	}
}

// adminOps are the write operations only the operator may run.
var adminOps = map[string]bool{"CreateOrganization": true, "SetPlan": true, "RenameOrganization": true, "DeleteOrganization": true,
	"QueueMail": true, "SendTestMail": true}

// state is what the write operations could change, to see that a refusal
// changed nothing.
func (e *env) state() string {
	e.t.Helper()
	orgs, err := e.db.ListOrganizations()
	if err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	for _, o := range orgs {
		_, domains, err1 := e.db.ListDomains(o.ID, store.Page{Page: 1, Limit: 1})
		keys, err2 := e.db.ListAPIKeys(o.ID)
		hooks, _, err3 := e.db.ListWebhooks(o.ID, store.Page{Page: 1, Limit: 100})
		if err := errors.Join(err1, err2, err3); err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s domains=%d", o.ID, o.Name, o.Plan, domains)
		if n, err := e.db.NotificationSettings(o.ID); err == nil {
			fmt.Fprintf(&b, " recipients=%d", len(n.Recipients))
		}
		if log, err := e.db.MailLog(o.ID, 100); err == nil {
			fmt.Fprintf(&b, " mail=%d", len(log))
		}
		for _, k := range keys {
			fmt.Fprintf(&b, " key=%s/%v", k.ID, k.Active())
		}
		for _, h := range hooks {
			fmt.Fprintf(&b, " hook=%s/%s", h.ID, h.Name)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestReadKeyRefusedOnEveryWrite ensures a read-scope key is refused
// (Forbidden, in the API's words) on every operation that changes
// something, and that nothing changed; a full key gets past the check to
// the operation (which may then fail for its own reasons), except on the
// operator's operations.
func TestReadKeyRefusedOnEveryWrite(t *testing.T) {
	e := newEnv(t, nil)
	before := e.state()
	for name, op := range e.writeOps() {
		err := op(e.readA)
		wantKind(t, name+" with a read key", err, app.Forbidden)
		if !adminOps[name] && (err == nil || err.Error() != "this API key has read scope and cannot change anything; use a key with full scope") {
			t.Errorf("%s with a read key: %v", name, err)
		}
	}
	if after := e.state(); after != before {
		t.Fatalf("refused operations changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
	for name, op := range e.writeOps() {
		err := op(e.fullA)
		if adminOps[name] {
			wantKind(t, name+" with a full key", err, app.Forbidden)
		} else if app.KindOf(err) == app.Forbidden && err != nil {
			t.Errorf("%s with a full key refused: %v", name, err)
		}
	}
	if after := e.state(); after == before {
		t.Error("the full key's operations changed nothing: the check refuses everyone")
	}
}

// TestReadKeyMayRead ensures a read-scope key runs the reads.
func TestReadKeyMayRead(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.app.Settings(ctx, e.readA); err != nil {
		t.Errorf("Settings: %v", err)
	}
	if _, n, err := e.app.ListKeys(ctx, e.readA, store.Page{Page: 1, Limit: 10}); err != nil || n != 2 {
		t.Errorf("ListKeys: %d keys, %v", n, err)
	}
	if l, err := e.app.ListWebhooks(ctx, e.readA, store.Page{Page: 1, Limit: 10}); err != nil || l.Total != 1 || l.Max != 25 {
		t.Errorf("ListWebhooks: %+v, %v", l, err)
	}
	if _, err := e.app.FailureSummary(ctx, e.readA); err != nil {
		t.Errorf("FailureSummary: %v", err)
	}
	if err := app.Authorize(app.Actor{}, app.Read); app.KindOf(err) != app.Unauthenticated {
		t.Errorf("the zero Actor: %v", err)
	}
}

// TestOperatorMayDoAnything ensures the operator runs what keys may not:
// the organizations' operations, and features outside the plan.
func TestOperatorMayDoAnything(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	org, err := e.app.CreateOrganization(ctx, app.Operator(nil), "delta", store.PlanStarter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.SetPlan(ctx, app.Operator(org), store.PlanBusiness); err != nil {
		t.Fatal(err)
	}
	if !app.Includes(app.Operator(e.beta), app.Webhooks) {
		t.Error("the operator is held to a plan")
	}
	if _, _, err := e.app.FailureReports(ctx, app.Operator(e.beta), store.FailureFilter{Page: store.Page{Page: 1, Limit: 10}}); err != nil {
		t.Errorf("the operator reading beta's failure reports: %v", err)
	}
}

// TestPlanFeatures ensures an organization whose plan lacks webhooks or
// failure reports is refused them with PlanFeature naming the feature,
// before anything is looked at, and that a read key hears of its rights
// first.
func TestPlanFeatures(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, _, err := e.app.CreateWebhook(ctx, e.fullB, "not a url", "", "")
	wantKind(t, "CreateWebhook on starter", err, app.PlanFeature)
	if ae := app.AsError(err); ae.Feature != app.Webhooks || !strings.Contains(ae.Msg, "webhooks") {
		t.Errorf("the refusal: %+v", ae)
	}
	_, err = e.app.ListWebhooks(ctx, e.fullB, store.Page{Page: 1, Limit: 10})
	wantKind(t, "ListWebhooks on starter", err, app.PlanFeature)
	_, err = e.app.TestWebhook(ctx, e.fullB, store.NewID())
	wantKind(t, "TestWebhook on starter", err, app.PlanFeature)
	_, _, err = e.app.FailureReports(ctx, e.fullB, store.FailureFilter{Page: store.Page{Page: 1, Limit: 10}})
	wantKind(t, "FailureReports on starter", err, app.PlanFeature)
	if ae := app.AsError(err); ae.Feature != app.FailureReports || ae.Msg != "your plan does not include forensic reports" {
		t.Errorf("the refusal: %+v", ae)
	}
	if app.Includes(e.fullB, app.FailureReports) || !app.Includes(e.fullC, app.FailureReports) {
		t.Error("Includes disagrees with the plans")
	}
	_, read := storetest.MustAPIKey(t, e.db, e.beta.ID, store.ScopeRead)
	wantKind(t, "WriteWebhooks with a starter read key", app.Authorize(e.signIn(read), app.WriteWebhooks), app.Forbidden)
}

// TestPlanLimits ensures the counts a plan allows are refused past the
// last one with PlanLimit (domains, webhooks) and KeyLimit (keys), and
// that nothing is created.
func TestPlanLimits(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for i := range 3 {
		if _, _, err := e.app.CreateDomain(ctx, e.fullB, fmt.Sprintf("d%d.example", i)); err != nil {
			t.Fatalf("domain %d of 3: %v", i+1, err)
		}
	}
	_, _, err := e.app.CreateDomain(ctx, e.fullB, "d3.example")
	wantKind(t, "a starter's fourth domain", err, app.PlanLimit)

	for i := range 10 {
		if _, _, err := e.app.CreateWebhook(ctx, e.fullC, "https://hooks.example.com/"+fmt.Sprint(i), "h", ""); err != nil {
			t.Fatalf("webhook %d of 10: %v", i+1, err)
		}
	}
	_, _, err = e.app.CreateWebhook(ctx, e.fullC, "https://hooks.example.com/10", "h", "")
	wantKind(t, "a business plan's eleventh webhook", err, app.PlanLimit)

	for i := range store.MaxActiveKeys - 1 { // beta has one key already
		if _, _, err := e.app.CreateKey(ctx, e.fullB, "k", "read"); err != nil {
			t.Fatalf("key %d: %v", i+2, err)
		}
	}
	_, _, err = e.app.CreateKey(ctx, e.fullB, "k", "read")
	wantKind(t, "a sixth active key", err, app.KeyLimit)

	_, domains, _ := e.db.ListDomains(e.beta.ID, store.Page{Page: 1, Limit: 1})
	_, hooks, _ := e.db.ListWebhooks(e.gamma.ID, store.Page{Page: 1, Limit: 1})
	keys, _ := e.db.ListAPIKeys(e.beta.ID)
	if domains != 3 || hooks != 10 || len(keys) != store.MaxActiveKeys {
		t.Errorf("past the limits: %d domains, %d webhooks, %d keys", domains, hooks, len(keys))
	}
}

// TestInvalidFieldsAreNamed ensures bad input is Invalid with every field
// named, and that the store's words stay in the cause.
func TestInvalidFieldsAreNamed(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, _, err := e.app.CreateWebhook(ctx, e.fullA, "http://hooks.example.com/", " ", "")
	ae := app.AsError(err)
	if ae.Kind != app.Invalid || len(ae.Fields) != 2 || ae.Fields[0].Field != "name" || ae.Fields[1].Field != "url" {
		t.Errorf("webhook with a blank name and an http URL: %+v", ae)
	}
	_, _, err = e.app.CreateKey(ctx, e.fullA, " ", "owner")
	ae = app.AsError(err)
	if ae.Kind != app.Invalid || len(ae.Fields) != 2 || ae.Msg != "invalid name: is required; invalid scope: must be full or read" {
		t.Errorf("key with a blank name and a bad scope: %+v", ae)
	}
	if se, ok := errors.AsType[*store.Error](err); !ok || !strings.Contains(se.Msg, "owner") {
		t.Errorf("the store's words are lost: %v", err)
	}
	_, _, err = e.app.CreateDomain(ctx, e.fullA, "not a domain")
	if ae := app.AsError(err); ae.Kind != app.Invalid || len(ae.Fields) != 1 || ae.Fields[0].Field != "name" {
		t.Errorf("a bad domain name: %+v", ae)
	}
}

// TestNotFoundAcrossOrganizations ensures another organization's things
// are not found, never forbidden, and stay as they were.
func TestNotFoundAcrossOrganizations(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	err := e.app.DeleteDomain(ctx, e.fullC, e.domA.ID)
	wantKind(t, "deleting alpha's domain as gamma", err, app.NotFound)
	if err.Error() != "domain not found" {
		t.Errorf("message %q", err)
	}
	_, err = e.app.FindWebhook(ctx, e.fullC, e.hookA.ID)
	wantKind(t, "reading alpha's webhook as gamma", err, app.NotFound)
	_, err = e.app.RevokeKey(ctx, e.fullC, e.keyAlph)
	wantKind(t, "revoking alpha's key as gamma", err, app.NotFound)
	if _, err := e.db.FindDomain(e.alpha.ID, e.domA.ID); err != nil {
		t.Errorf("alpha's domain: %v", err)
	}
}

// TestAuthenticateThrottles ensures an address is refused (Throttled,
// with how long) once it has failed too often, even with a good key,
// until its minute is over; the sign-in form counts with it.
func TestAuthenticateThrottles(t *testing.T) {
	e := newEnv(t, func(c *app.Config) { c.AuthFailLimit = 3 })
	for range 2 {
		_, err := e.app.Authenticate("198.51.100.7", "dmk_wrong")
		wantKind(t, "a wrong key", err, app.Unauthenticated)
	}
	_, _, err := e.app.SignIn("198.51.100.7", "dmk_wrong")
	wantKind(t, "a wrong key at the sign-in form", err, app.Unauthenticated)
	_, err = e.app.Authenticate("198.51.100.7", e.readSecret)
	wantKind(t, "a good key from a throttled address", err, app.Throttled)
	if ae := app.AsError(err); ae.RetryAfter <= 0 || ae.RetryAfter > time.Minute {
		t.Errorf("retry after %s", ae.RetryAfter)
	}
	if _, err := e.app.Authenticate("198.51.100.8", e.readSecret); err != nil {
		t.Errorf("another address: %v", err)
	}
	e.clock.Advance(time.Minute)
	token, _, err := e.app.SignIn("198.51.100.7", e.readSecret)
	if err != nil {
		t.Fatalf("a minute later: %v", err)
	}
	actor, _, err := e.app.Session(token)
	if err != nil || actor.Org().ID != e.alpha.ID || actor.Key().Scope != store.ScopeRead {
		t.Fatalf("the session: %+v, %v", actor, err)
	}
	if err := e.app.SignOut(token); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.app.Session(token)
	wantKind(t, "a session signed out", err, app.Unauthenticated)
}

// TestAsError ensures the errors of the packages below get their kinds.
func TestAsError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind app.Kind
		msg  string
	}{
		{&store.Error{Kind: store.ErrNotFound, Msg: "domain not found"}, app.NotFound, "domain not found"},
		{fmt.Errorf("wrapped: %w", &store.Error{Kind: store.ErrConflict, Msg: "taken"}), app.Conflict, "taken"},
		{&store.Error{Kind: store.ErrLimit, Msg: "plan limit of 3 domains reached"}, app.PlanLimit, "plan limit of 3 domains reached"},
		{&store.Error{Kind: store.ErrInvalid, Msg: "bad"}, app.Invalid, "bad"},
		{&dnscheck.VerifyError{Reason: "no record"}, app.Unverified, "no record"},
		{fmt.Errorf("lookup: %w", dnscheck.ErrTemporary), app.DNSUnavailable, "DNS lookups failed or timed out; try again later"},
		{&egress.URLError{Reason: "must be https"}, app.Invalid, "invalid url: must be https"},
		{errors.New("disk on fire"), app.Internal, "internal error"},
	} {
		if ae := app.AsError(tc.err); ae.Kind != tc.kind || ae.Msg != tc.msg {
			t.Errorf("%v: %s %q, want %s %q", tc.err, ae.Kind, ae.Msg, tc.kind, tc.msg)
		}
	}
}

// TestRevokedKeyCountsApart ensures a revoked key's failed
// authentications, at the API or the sign-in form, count against that
// key and not its address (issue 24 item 10): the address keeps its
// budget for other keys, the revoked key alone is Throttled past the
// limit, the errors name the key's id (never the key), and unknown keys
// still count against the address.
func TestRevokedKeyCountsApart(t *testing.T) {
	e := newEnv(t, func(c *app.Config) { c.AuthFailLimit = 3 })
	k, secret := storetest.MustAPIKey(t, e.db, e.alpha.ID, store.ScopeFull)
	if _, err := e.db.RevokeAPIKey(k.ID); err != nil {
		t.Fatal(err)
	}
	const addr = "198.51.100.7"
	for i := range 3 {
		var err error
		if i == 1 {
			_, _, err = e.app.SignIn(addr, secret)
		} else {
			_, err = e.app.Authenticate(addr, secret)
		}
		wantKind(t, fmt.Sprintf("revoked key, attempt %d", i+1), err, app.Unauthenticated)
		if ae := app.AsError(err); ae.KeyID != k.ID || strings.Contains(ae.Error(), secret) {
			t.Errorf("attempt %d: key id %q, message %q", i+1, ae.KeyID, ae.Error())
		}
	}
	_, err := e.app.Authenticate(addr, secret)
	wantKind(t, "the revoked key past its limit", err, app.Throttled)
	if ae := app.AsError(err); ae.KeyID != k.ID || ae.RetryAfter <= 0 || ae.RetryAfter > time.Minute {
		t.Errorf("throttled revoked key: id %q, retry after %s", ae.KeyID, ae.RetryAfter)
	}
	if _, err := e.app.Authenticate(addr, e.readSecret); err != nil {
		t.Errorf("another key from the address: %v", err)
	}
	e.clock.Advance(time.Minute)
	_, err = e.app.Authenticate(addr, secret)
	wantKind(t, "the revoked key a minute later", err, app.Unauthenticated)
	for i := range 3 {
		_, err := e.app.Authenticate(addr, fmt.Sprintf("dmk_%032x", i))
		wantKind(t, "an unknown key", err, app.Unauthenticated)
		if ae := app.AsError(err); ae.KeyID != "" {
			t.Errorf("an unknown key has key id %q", ae.KeyID)
		}
	}
	_, err = e.app.Authenticate(addr, e.readSecret)
	wantKind(t, "a good key after 3 unknown ones", err, app.Throttled)
	if ae := app.AsError(err); ae.KeyID != "" {
		t.Errorf("the address's throttle has key id %q", ae.KeyID)
	}
}
