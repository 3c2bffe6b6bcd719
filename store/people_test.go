package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestAccounts covers the email rules and the case-insensitive index.
func TestAccounts(t *testing.T) {
	db := storetest.Open(t)
	acc := storetest.MustAccount(t, db, " Ann@Example.COM ")
	if acc.Email != "ann@example.com" {
		t.Errorf("email %q", acc.Email)
	}
	if _, err := db.CreateAccount("ANN@example.com"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same email in another case: %v", err)
	}
	for _, bad := range []string{"", "ann", "Ann <ann@example.com>", "ann@", "@example.com", "a b@example.com", string(make([]byte, 300)) + "@x.com"} {
		if _, err := db.CreateAccount(bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateAccount(%q): %v", bad, err)
		}
	}
	got, err := db.FindAccountByEmail("ANN@EXAMPLE.COM")
	if err != nil || got.ID != acc.ID {
		t.Fatalf("FindAccountByEmail: %v", err)
	}
	if _, err := db.FindAccount("nonsense"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FindAccount(nonsense): %v", err)
	}
	upd, err := db.UpdateAccount(acc.ID, false, func(a *store.Account) error {
		a.PasswordHash, a.Email, a.ID = "h", "evil@example.com", "x"
		return nil
	})
	if err != nil || upd.PasswordHash != "h" || upd.Email != "ann@example.com" || upd.ID != acc.ID {
		t.Errorf("UpdateAccount: %+v %v", upd, err)
	}
}

// TestMembershipsAndSessions covers the last-owner rule, tenant
// isolation of member ids, and that role changes, removals and resets
// end the person's sessions (and no one else's).
func TestMembershipsAndSessions(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	owner, om := storetest.MustMember(t, db, a.ID, "owner@example.com", "owner")
	viewer, vm := storetest.MustMember(t, db, a.ID, "viewer@example.com", "viewer")
	_, bm := storetest.MustMember(t, db, b.ID, "viewer@example.com", "admin")
	if _, err := db.AddMembership(a.ID, viewer.ID, "admin"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a member twice: %v", err)
	}
	if _, err := db.SetMemberRole(a.ID, om.ID, "admin"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("demoting the last owner: %v", err)
	}
	if _, err := db.RemoveMember(a.ID, om.ID); !errors.Is(err, store.ErrConflict) {
		t.Errorf("removing the last owner: %v", err)
	}
	if _, err := db.SetMemberRole(a.ID, bm.ID, "owner"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("b's member through a: %v", err)
	}
	session := func(acc *store.Account, org *store.Organization) string {
		tok, s, err := db.CreatePersonSession(acc.ID, org.ID, clock.Now())
		if err != nil || s.Account.ID != acc.ID || s.KeyID != "" {
			t.Fatalf("CreatePersonSession: %v %+v", err, s)
		}
		return tok
	}
	live := func(tok string) bool { _, _, _, err := db.FindSession(tok, clock.Now()); return err == nil }
	tOwner, tViewer := session(owner, a), session(viewer, a)
	if _, _, err := db.CreatePersonSession(owner.ID, b.ID, clock.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session in an organization of no membership: %v", err)
	}
	s, key, org, err := db.FindSession(tViewer, clock.Now())
	if err != nil || key != nil || org.ID != a.ID || s.Role != "viewer" || s.Account.Email != "viewer@example.com" {
		t.Fatalf("FindSession: %v %+v", err, s)
	}
	if err := db.SetSessionOrg(tViewer, b.ID, clock.Now()); err != nil {
		t.Fatal(err)
	}
	if s, _, org, _ := db.FindSession(tViewer, clock.Now()); org.ID != b.ID || s.Role != "admin" {
		t.Errorf("after the switch: %v %+v", org, s)
	}
	if err := db.SetSessionOrg(tOwner, b.ID, clock.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("switching to an organization of no membership: %v", err)
	}
	if _, err := db.SetMemberRole(a.ID, vm.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if live(tViewer) || !live(tOwner) {
		t.Errorf("after a role change: viewer %v, owner %v", live(tViewer), live(tOwner))
	}
	tViewer = session(viewer, a)
	if _, err := db.RemoveMember(a.ID, vm.ID); err != nil {
		t.Fatal(err)
	}
	if live(tViewer) || !live(tOwner) {
		t.Errorf("after a removal: viewer %v, owner %v", live(tViewer), live(tOwner))
	}
	if _, err := db.UpdateAccount(owner.ID, true, func(*store.Account) error { return nil }); err != nil || live(tOwner) {
		t.Errorf("after a reset: %v, %v", err, live(tOwner))
	}
	if n := len(storetest.Keys(t, db, "web_sessions_by_account")); n != 0 {
		t.Errorf("%d session index entries left", n)
	}
	ms, orgs, err := db.AccountMemberships(viewer.ID)
	if err != nil || len(ms) != 1 || orgs[0].ID != b.ID {
		t.Errorf("AccountMemberships: %v %v", ms, err)
	}
}

// TestInvitationStore covers single use, expiry and the hashed token.
func TestInvitationStore(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	acc, _ := storetest.MustMember(t, db, org.ID, "x@example.com", "viewer")
	tok, _, err := db.CreateInvitation(store.InviteKind, org.ID, acc.ID, clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range storetest.Keys(t, db, "invitations") {
		if string(k) == tok {
			t.Error("the token is stored in the clear")
		}
	}
	if _, _, _, err := db.FindInvitation(tok, clock.Now().Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("at expiry: %v", err)
	}
	refused := errors.New("refused")
	if _, _, _, err := db.UseInvitation(tok, clock.Now(), false, func(*store.Invitation, *store.Account) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("fn's error: %v", err)
	}
	if _, acc2, _, err := db.UseInvitation(tok, clock.Now(), false, func(_ *store.Invitation, a *store.Account) error {
		a.PasswordHash = "h"
		return nil
	}); err != nil || acc2.PasswordHash != "h" {
		t.Fatalf("use: %v", err)
	}
	if _, _, _, err := db.UseInvitation(tok, clock.Now(), false, func(*store.Invitation, *store.Account) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("used twice: %v", err)
	}
	clock.Advance(8 * 24 * time.Hour)
	if n, err := db.SweepInvitations(clock.Now().Add(-7 * 24 * time.Hour)); err != nil || n != 1 {
		t.Errorf("SweepInvitations: %d %v", n, err)
	}
}

// TestOrganizationDeletionTakesPeople ensures deleting an organization
// deletes its memberships, links and audit log, and keeps the accounts.
func TestOrganizationDeletionTakesPeople(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	acc, _ := storetest.MustMember(t, db, a.ID, "x@example.com", "owner")
	storetest.MustMember(t, db, b.ID, "x@example.com", "owner")
	if _, _, err := db.CreateInvitation(store.InviteKind, a.ID, acc.ID, clock.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, org := range []*store.Organization{a, b} {
		if err := db.AppendAudit(store.AuditEntry{At: clock.Now(), OrgID: org.ID, Actor: "operator", Action: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.DeleteOrganization(a.ID); err != nil {
		t.Fatal(err)
	}
	for bucket, want := range map[string]int{"memberships": 1, "memberships_by_org": 1, "memberships_by_account": 1,
		"invitations": 0, "invitations_by_org": 0, "audit_log": 1, "accounts": 1} {
		if n := len(storetest.Keys(t, db, bucket)); n != want {
			t.Errorf("%s: %d entries, want %d", bucket, n, want)
		}
	}
}

// TestAuditStore covers the order, filters, cursor and retention.
func TestAuditStore(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	a := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	b := storetest.MustOrganization(t, db, "b", store.PlanUnlimited)
	for i := range 5 {
		if err := db.AppendAudit(store.AuditEntry{At: clock.Now().Add(time.Duration(i) * time.Hour), OrgID: a.ID, Actor: "p", Action: []string{"x", "y"}[i%2]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AppendAudit(store.AuditEntry{At: clock.Now(), OrgID: b.ID, Actor: "p", Action: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendAudit(store.AuditEntry{At: clock.Now(), OrgID: store.NewID()}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown organization: %v", err)
	}
	p, err := db.ListAudit(a.ID, store.AuditFilter{Action: "x", Limit: 2})
	if err != nil || len(p.Entries) != 2 || !p.Entries[0].At.Equal(clock.Now().Add(4*time.Hour)) || p.NextCursor == "" {
		t.Fatalf("page 1: %+v %v", p, err)
	}
	p2, err := db.ListAudit(a.ID, store.AuditFilter{Action: "x", Limit: 2, Cursor: p.NextCursor})
	if err != nil || len(p2.Entries) != 1 || !p2.Entries[0].At.Equal(clock.Now()) || p2.NextCursor != "" {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	if _, err := db.ListAudit(b.ID, store.AuditFilter{Cursor: p.NextCursor}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a's cursor on b: %v", err)
	}
	p, _ = db.ListAudit(a.ID, store.AuditFilter{From: clock.Now().Add(time.Hour), To: clock.Now().Add(3 * time.Hour)})
	if len(p.Entries) != 3 {
		t.Errorf("from..to: %d entries", len(p.Entries))
	}
	if n, err := db.DeleteAuditBefore(clock.Now().Add(2 * time.Hour)); err != nil || n != 3 {
		t.Errorf("DeleteAuditBefore: %d %v", n, err)
	}
}

// TestPendingMembership: a membership gives no session until its
// invitation is used.
func TestPendingMembership(t *testing.T) {
	clock := storetest.NewClock(storetest.Epoch())
	db := storetest.OpenWithClock(t, clock)
	org := storetest.MustOrganization(t, db, "a", store.PlanUnlimited)
	acc := storetest.MustAccount(t, db, "p@example.com")
	if _, err := db.AddMembership(org.ID, acc.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreatePersonSession(acc.ID, org.ID, clock.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a session of a pending membership: %v", err)
	}
	if ms, _, _ := db.AccountMemberships(acc.ID); len(ms) != 0 {
		t.Errorf("a pending membership listed as access: %d", len(ms))
	}
	if ms, _ := db.ListMembers(org.ID); len(ms) != 1 || ms[0].Accepted() {
		t.Errorf("the pending member: %+v", ms)
	}
	tok, _, err := db.CreateInvitation(store.InviteKind, org.ID, acc.ID, clock.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := db.UseInvitation(tok, clock.Now(), false, func(*store.Invitation, *store.Account) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreatePersonSession(acc.ID, org.ID, clock.Now()); err != nil {
		t.Errorf("a session after the invitation: %v", err)
	}
}
