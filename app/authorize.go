package app

import (
	"github.com/dmarcd/dmarcd/store"
)

// Who may do what, in one place: every operation names its Action and
// calls Authorize first; the front ends call Authorize too, before they
// read a request, so that a refusal comes before any other answer. A new
// role (people with owner, admin or viewer rights, say) is a field of
// Actor and a case of Authorize; a new permission is an Action.

// Actor is who runs an operation: an API key (over the API, or behind a
// web session) within its organization, or the operator, who reaches the
// server through its admin socket or its database file and may do
// anything. Only this package makes Actors of keys (Authenticate,
// Session); the zero Actor may do nothing.
type Actor struct {
	org      *store.Organization
	key      *store.APIKey // nil for the operator
	operator bool
}

// Operator is the operator acting within org; org is nil for what
// concerns no one organization (listing or creating organizations,
// revoking a key by its id).
func Operator(org *store.Organization) Actor { return Actor{org: org, operator: true} }

// keyActor is the Actor of an authenticated API key.
func keyActor(key *store.APIKey, org *store.Organization) Actor { return Actor{org: org, key: key} }

// Org is the actor's organization; nil for the operator outside one.
func (a Actor) Org() *store.Organization { return a.org }

// Key is the API key the actor signed in with; nil for the operator.
func (a Actor) Key() *store.APIKey { return a.key }

// orgID is the id of the actor's organization, "" outside one.
func (a Actor) orgID() string {
	if a.org == nil {
		return ""
	}
	return a.org.ID
}

// Action is what an operation does, as Authorize judges it: whether it
// changes anything, and the plan feature it needs, if any.
type Action struct {
	name    string
	write   bool    // changes something: refused to read-only keys
	admin   bool    // the operator's alone (organizations, plans)
	feature Feature // the plan must include it; noFeature for none
}

// String is the action's name.
func (a Action) String() string { return a.name }

// The actions. Every operation of this package names one; so does every
// route of the front ends.
var (
	// Read is reading the organization's data.
	Read = Action{name: "read"}
	// Write is changing domains, keys, mailboxes, alerts or quarantine.
	Write = Action{name: "write", write: true}
	// ReadWebhooks is listing and reading webhooks (a plan feature).
	ReadWebhooks = Action{name: "read-webhooks", feature: Webhooks}
	// WriteWebhooks is creating, changing, testing or deleting webhooks.
	WriteWebhooks = Action{name: "write-webhooks", write: true, feature: Webhooks}
	// ReadFailureReports is reading failure (forensic) reports (a plan
	// feature).
	ReadFailureReports = Action{name: "read-failure-reports", feature: FailureReports}
	// ReadNotifications is reading the organization's notification
	// settings and mail log (every signed-in actor; viewers see them
	// read-only).
	ReadNotifications = Action{name: "read-notifications"}
	// WriteNotifications is changing the organization's notification
	// recipients: owners and admins (full-scope keys today).
	WriteNotifications = Action{name: "write-notifications", write: true}
	// SendMail is sending a test mail or queuing a built one (a digest
	// sent now): the operator's alone.
	SendMail = Action{name: "send-mail", write: true, admin: true}
	// Administer is creating, renaming, re-planning and deleting
	// organizations, and what crosses them: the operator's alone.
	Administer = Action{name: "administer", write: true, admin: true}
)

// errReadOnly is what a read-scope key hears when it tries to change
// something.
var errReadOnly = &Error{Kind: Forbidden,
	Msg: "this API key has read scope and cannot change anything; use a key with full scope"}

// Authorize returns nil when actor may run act, else an *Error: Forbidden
// (the actor's rights), PlanFeature (the organization's plan) or
// Unauthenticated (the zero Actor). The rights are checked before the
// plan. It is the one permission check of dmarcd.
func Authorize(actor Actor, act Action) error {
	switch {
	case actor.operator:
		return nil
	case actor.key == nil || actor.org == nil:
		return &Error{Kind: Unauthenticated, Msg: "not signed in"}
	case act.admin:
		return &Error{Kind: Forbidden, Msg: "only the operator may " + act.name}
	case act.write && actor.key.Scope != store.ScopeFull:
		return errReadOnly
	}
	return requireFeature(actor, act.feature)
}
