package app

import (
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// The audit log (docs/people.md): the operations write it themselves,
// after they succeed, naming the actor (a person's email, "key:<prefix>"
// or "operator"), the action and its target, and the client address the
// actor came from. A failed sign-in is written to the organizations of
// the account tried, when the email is an account's; an unknown email is
// written nowhere (it may be a typo or a password typed in the wrong
// field), the failed-attempt limiter counts it. A failure to write the
// log is logged and does not fail the operation, which has happened.

// Audit records that actor did action to target from client address addr
// (the actor's own address when addr is ""), in the actor's
// organization; nothing outside one.
func (a *App) Audit(actor Actor, action, target, addr string) {
	if addr == "" {
		addr = actor.addr
	}
	if actor.org == nil {
		return
	}
	e := store.AuditEntry{At: a.clock(), OrgID: actor.org.ID, Actor: actor.Name(), Action: action, Target: target, IP: addr}
	if err := a.db.AppendAudit(e); err != nil {
		a.log.Error("writing the audit log", "action", action, "error", err)
	}
}

// audit is Audit from the actor's address.
func (a *App) audit(actor Actor, action, target string) { a.Audit(actor, action, target, "") }

// auditAccount records action by the person of acc in each of their
// organizations (a failed sign-in belongs to none in particular), in one
// write.
func (a *App) auditAccount(acc *store.Account, action, addr string) {
	ms, _, err := a.db.AccountMemberships(acc.ID)
	if err == nil {
		es := make([]store.AuditEntry, len(ms))
		for i, m := range ms {
			es[i] = store.AuditEntry{At: a.clock(), OrgID: m.OrgID, Actor: acc.Email, Action: action, Target: acc.Email, IP: addr}
		}
		err = a.db.AppendAudit(es...)
	}
	if err != nil {
		a.log.Error("writing the audit log", "action", action, "error", err)
	}
}

// AuditFilter selects entries of the audit log; empty fields select all.
type AuditFilter struct {
	Actor, Action string
	From, To      time.Time // both included; zero for no bound
	Cursor        string    // a page's NextCursor
	Limit         int       // 1 to 500; 0 means 50
}

// AuditPage is one page of the log, newest first.
type AuditPage struct {
	Entries    []*store.AuditEntry
	NextCursor string // "" when nothing follows
}

// AuditLog returns one page of the actor's organization's audit log
// (ReadAudit: admins, owners, full-scope keys). Invalid for a cursor not
// of this listing or a limit out of range.
func (a *App) AuditLog(actor Actor, f AuditFilter) (AuditPage, error) {
	if err := Authorize(actor, ReadAudit); err != nil {
		return AuditPage{}, err
	}
	if f.Limit < 0 || f.Limit > 500 {
		return AuditPage{}, invalid(nil, FieldError{Field: "limit", Message: "must be 1 to 500"})
	}
	p, err := a.db.ListAudit(actor.orgID(), store.AuditFilter{Actor: f.Actor, Action: f.Action,
		From: f.From, To: f.To, Cursor: f.Cursor, Limit: f.Limit})
	if err != nil {
		if ae := AsError(err); ae.Kind == Invalid {
			return AuditPage{}, invalid(err, FieldError{Field: "cursor", Message: "is not one this listing gave"})
		}
		return AuditPage{}, err
	}
	return AuditPage{Entries: p.Entries, NextCursor: p.NextCursor}, nil
}

// SweepAudit deletes the audit entries older than retention at now (the
// housekeeping job) and returns how many, with the used and expired
// one-time links of as long ago.
func (a *App) SweepAudit(retention time.Duration) (int, error) {
	now := a.clock()
	if _, err := a.db.SweepInvitations(now.Add(-InvitationTTL)); err != nil {
		return 0, err
	}
	return a.db.DeleteAuditBefore(now.Add(-retention))
}
