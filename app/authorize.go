package app

import (
	"strings"

	"github.com/dmarcd/dmarcd/store"
)

// Who may do what, in one place: every operation names its Action and
// calls Authorize first; the front ends call Authorize too, before they
// read a request, so that a refusal comes before any other answer.
// docs/people.md has the table of roles and actions.

// Role is what a person may do in one organization: a viewer reads, an
// admin also changes the organization's data (domains, webhooks,
// mailboxes, keys, alerts, quarantine), an owner also manages its people,
// its plan and its existence. Roles are ordered: each has the rights of
// those below it.
type Role int

// The roles; the zero Role is none.
const (
	RoleViewer Role = iota + 1
	RoleAdmin
	RoleOwner
)

var roleNames = [...]string{RoleViewer: "viewer", RoleAdmin: "admin", RoleOwner: "owner"}

// String names the role ("" for none).
func (r Role) String() string {
	if r > 0 && int(r) < len(roleNames) {
		return roleNames[r]
	}
	return ""
}

// ParseRole returns the role named s (case-insensitive, surrounding space
// ignored); an unknown name is Invalid naming the field role.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "owner":
		return RoleOwner, nil
	case "admin":
		return RoleAdmin, nil
	case "viewer":
		return RoleViewer, nil
	}
	return 0, invalid(nil, FieldError{Field: "role", Message: "must be owner, admin or viewer"})
}

// Actor is who runs an operation: an API key (over the API, or behind a
// web session) within its organization, a person (behind a web session)
// with their role in the session's organization, or the operator, who
// reaches the server through its admin socket or its database file and
// may do anything. Only this package makes Actors of keys and people
// (Authenticate, Session, the sign-ins); the zero Actor may do nothing.
type Actor struct {
	org      *store.Organization
	key      *store.APIKey  // nil for a person and the operator
	account  *store.Account // nil for a key and the operator
	role     Role           // a person's role in org
	operator bool
	addr     string // the client address, for the audit log
}

// Operator is the operator acting within org; org is nil for what
// concerns no one organization (listing or creating organizations,
// revoking a key by its id).
func Operator(org *store.Organization) Actor { return Actor{org: org, operator: true} }

// keyActor is the Actor of an authenticated API key.
func keyActor(key *store.APIKey, org *store.Organization) Actor { return Actor{org: org, key: key} }

// personActor is the Actor of a signed-in person with role in org.
func personActor(acc *store.Account, org *store.Organization, role Role) Actor {
	return Actor{org: org, account: acc, role: role}
}

// Org is the actor's organization; nil for the operator outside one.
func (a Actor) Org() *store.Organization { return a.org }

// Key is the API key the actor signed in with; nil for a person and the
// operator.
func (a Actor) Key() *store.APIKey { return a.key }

// Person is the person who signed in; nil for a key and the operator.
func (a Actor) Person() *store.Account { return a.account }

// IsOperator reports whether the actor is the operator.
func (a Actor) IsOperator() bool { return a.operator }

// Role is the actor's rights as a role: a person's role in the
// organization; owner for the operator; for an API key, admin (full
// scope: the organization's data but not its people, plan or existence)
// or viewer (read scope); none for the zero Actor.
func (a Actor) Role() Role {
	switch {
	case a.operator:
		return RoleOwner
	case a.account != nil:
		return a.role
	case a.key != nil && a.key.Scope == store.ScopeFull:
		return RoleAdmin
	case a.key != nil:
		return RoleViewer
	}
	return 0
}

// Email is the person's email; "" for a key and the operator.
func (a Actor) Email() string {
	if a.account == nil {
		return ""
	}
	return a.account.Email
}

// Name is how the audit log names the actor: the person's email,
// "key:<prefix>" or "operator".
func (a Actor) Name() string {
	switch {
	case a.account != nil:
		return a.account.Email
	case a.key != nil:
		return "key:" + a.key.Prefix
	case a.operator:
		return "operator"
	}
	return ""
}

// Addr is the client address the actor signed in from ("" unknown).
func (a Actor) Addr() string { return a.addr }

// WithAddr is the actor acting from client address addr (a web session
// is read without one): the address its operations write in the audit
// log.
func (a Actor) WithAddr(addr string) Actor { a.addr = addr; return a }

// orgID is the id of the actor's organization, "" outside one.
func (a Actor) orgID() string {
	if a.org == nil {
		return ""
	}
	return a.org.ID
}

// Action is what an operation does, as Authorize judges it: the least
// role it needs, whether it changes anything, and the plan feature it
// needs, if any.
type Action struct {
	name    string
	role    Role    // the least role that may run it
	write   bool    // changes something: refused to read-only keys
	admin   bool    // the operator's alone (organizations, plans)
	self    bool    // a person's own account: people only, any role
	feature Feature // the plan must include it; noFeature for none
}

// String is the action's name.
func (a Action) String() string { return a.name }

// The actions. Every operation of this package names one; so does every
// route of the front ends.
var (
	// Read is reading the organization's data.
	Read = Action{name: "read", role: RoleViewer}
	// Write is changing domains, keys, mailboxes, alerts or quarantine.
	Write = Action{name: "write", role: RoleAdmin, write: true}
	// ReadWebhooks is listing and reading webhooks (a plan feature).
	ReadWebhooks = Action{name: "read-webhooks", role: RoleViewer, feature: Webhooks}
	// WriteWebhooks is creating, changing, testing or deleting webhooks.
	WriteWebhooks = Action{name: "write-webhooks", role: RoleAdmin, write: true, feature: Webhooks}
	// ReadFailureReports is reading failure (forensic) reports (a plan
	// feature).
	ReadFailureReports = Action{name: "read-failure-reports", role: RoleViewer, feature: FailureReports}
	// ReadPeople is listing the organization's members (their emails and
	// roles): admins and owners, and full-scope keys.
	ReadPeople = Action{name: "read-people", role: RoleAdmin}
	// ManagePeople is inviting and removing members, changing their roles
	// and resetting their passwords: owners only (no API key: keys are
	// at most admins).
	ManagePeople = Action{name: "manage-people", role: RoleOwner, write: true}
	// ReadAudit is reading the organization's audit log: admins and
	// owners, and full-scope keys.
	ReadAudit = Action{name: "read-audit", role: RoleAdmin}
	// OwnOrganization is renaming or deleting the organization: owners
	// (and the operator).
	OwnOrganization = Action{name: "own-organization", role: RoleOwner, write: true}
	// ManageOwnAccount is a person's own sign-in settings (TOTP): any
	// signed-in person, of any role; no key.
	ManageOwnAccount = Action{name: "manage-own-account", role: RoleViewer, self: true}
	// ReadNotifications is reading the organization's notification
	// settings and mail log (every signed-in actor; viewers see them
	// read-only).
	ReadNotifications = Action{name: "read-notifications", role: RoleViewer}
	// WriteNotifications is changing the organization's notification
	// recipients: owners and admins, and full-scope keys.
	WriteNotifications = Action{name: "write-notifications", role: RoleAdmin, write: true}
	// ManageOwnNotifications is reading and changing one's own
	// notification entry (alerts mailed at once, digest) in the
	// organization: any signed-in person, of any role; no key (a key is
	// no person).
	ManageOwnNotifications = Action{name: "manage-own-notifications", role: RoleViewer, self: true}
	// SendMail is sending a test mail or queuing a built one (a digest
	// sent now): the operator's alone.
	SendMail = Action{name: "send-mail", role: RoleOwner, write: true, admin: true}
	// Administer is creating, renaming, re-planning and deleting
	// organizations, and what crosses them: the operator's alone.
	Administer = Action{name: "administer", role: RoleOwner, write: true, admin: true}
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
	case actor.org == nil || actor.key == nil && actor.account == nil:
		return &Error{Kind: Unauthenticated, Msg: "not signed in"}
	case act.admin:
		return &Error{Kind: Forbidden, Msg: "only the operator may " + act.name}
	case act.self && actor.account == nil:
		return &Error{Kind: Forbidden, Msg: "only a person signed in with a password or single sign-on may " + act.name}
	case actor.Role() >= act.role:
		return requireFeature(actor, act.feature)
	case actor.key != nil && act.write && actor.key.Scope != store.ScopeFull:
		return errReadOnly
	case actor.key != nil:
		return &Error{Kind: Forbidden, Msg: "API keys may not " + act.name + ": an owner does it in the web interface or with dmarcd user"}
	}
	return &Error{Kind: Forbidden, Msg: "your role (" + actor.role.String() + ") may not " + act.name}
}

// Writes reports whether the action changes something (a viewer and a
// read-scope key are refused it).
func (a Action) Writes() bool { return a.write }
