package app

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// People (issue 26, docs/people.md): accounts that sign in with a
// password (and TOTP) or single sign-on, their memberships with a role in
// each organization, invitations and password resets by one-time link,
// and the sessions they open. Every operation here checks its Action with
// Authorize like the others; the sign-ins are where Actors of people are
// made.

// InvitationTTL is how long an invitation link is good for.
const InvitationTTL = 7 * 24 * time.Hour

// ResetTTL is how long a password-reset link is good for.
const ResetTTL = 24 * time.Hour

// accountFailWindow is the window of the per-account limit.
const accountFailWindow = 15 * time.Minute

// errSignIn is the one answer to a wrong email or password: it says
// nothing of whether the account exists.
func errSignIn(cause error) error {
	return &Error{Kind: Unauthenticated, Msg: "wrong email or password", Err: cause}
}

var errTOTPRequired = &Error{Kind: TOTPRequired, Msg: "enter the code of your authenticator app, or a recovery code"}

// throttled is the answer for an address or account over its limit.
func throttled(what string, until, now time.Time) error {
	return &Error{Kind: Throttled, Msg: "too many failed sign-ins " + what + "; try again later", RetryAfter: until.Sub(now)}
}

func (a *App) dummy() string {
	a.dummyHashOnce.Do(func() { a.dummyHash = a.hashPassword("no account has this password") })
	return a.dummyHash
}

// SignInPassword signs the person of email in with password (and totp,
// a TOTP code or a recovery code, when they enrolled one) from client
// address addr, and opens a session in their first organization (by
// name). Errors: Throttled while addr or the email is over its limit of
// failures (checked first); Unauthenticated "wrong email or password"
// for an unknown email, an account without a password and a wrong
// password alike (each runs one argon2id verification, so the time says
// nothing either), and for a wrong code; TOTPRequired for a right
// password without a code; Forbidden for a person of no organization.
// Each failure counts against addr and the email.
func (a *App) SignInPassword(addr, email, password, totp string) (string, Actor, error) {
	now := a.clock()
	key := normEmail(email)
	if blocked, until := a.authFail.blocked(addr, now); blocked {
		return "", Actor{}, throttled("from this address", until, now)
	}
	if blocked, until := a.accountFail.blocked(key, now); blocked {
		return "", Actor{}, throttled("for this account", until, now)
	}
	fail := func(acc *store.Account, cause error) (string, Actor, error) {
		a.authFail.fail(addr, now)
		a.accountFail.fail(key, now)
		if acc != nil {
			a.auditAccount(acc, "sign-in.fail", addr)
		} else if err := a.db.SyncAudit(); err != nil {
			a.log.Error("syncing the database", "error", err)
		}
		return "", Actor{}, errSignIn(cause)
	}
	acc, err := a.db.FindAccountByEmail(key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", Actor{}, err
	}
	hash := a.dummy()
	if acc != nil && acc.PasswordHash != "" {
		hash = acc.PasswordHash
	}
	ok := a.verifyPassword(hash, password)
	if acc == nil || acc.PasswordHash == "" || !ok {
		return fail(acc, nil)
	}
	if acc.TOTPEnabled {
		if totp == "" {
			return "", Actor{}, errTOTPRequired
		}
		used, err := a.useSecondFactor(acc, totp, now)
		if err != nil {
			if KindOf(err) == Unauthenticated {
				a.authFail.fail(addr, now)
				a.accountFail.fail(key, now)
				a.auditAccount(acc, "sign-in.fail", addr)
			}
			return "", Actor{}, err
		}
		acc = used
	}
	return a.openPersonSession(acc, addr, "sign-in")
}

// normEmail is the limiter's and the index's form of an email.
func normEmail(email string) string {
	if e, err := store.CleanEmail(email); err == nil {
		return e
	}
	return email
}

// errWrongCode is a TOTP or recovery code that is not right (or used).
var errWrongCode = &Error{Kind: Unauthenticated, Msg: "wrong code"}

// useSecondFactor checks code (TOTP or recovery) for acc at now and
// records its use (the step, or the recovery code spent).
func (a *App) useSecondFactor(acc *store.Account, code string, now time.Time) (*store.Account, error) {
	return a.db.UpdateAccount(acc.ID, false, func(cur *store.Account) error {
		if !cur.TOTPEnabled {
			return nil
		}
		if isRecoveryCode(code) {
			h := recoveryHash(code)
			i := slices.Index(cur.RecoveryHashes, h)
			if i < 0 {
				return errWrongCode
			}
			cur.RecoveryHashes = slices.Delete(cur.RecoveryHashes, i, i+1)
			return nil
		}
		step := totpCheck(cur.TOTPSecret, code, now, cur.TOTPLastStep)
		if step < 0 {
			return errWrongCode
		}
		cur.TOTPLastStep = step
		return nil
	})
}

// openPersonSession opens a session for acc in its first organization and
// audits the sign-in there.
func (a *App) openPersonSession(acc *store.Account, addr, action string) (string, Actor, error) {
	ms, orgs, err := a.db.AccountMemberships(acc.ID)
	if err != nil {
		return "", Actor{}, err
	}
	if len(ms) == 0 {
		return "", Actor{}, &Error{Kind: Forbidden, Msg: "your account gives access to no organization: use your invitation link, or ask an owner to invite you"}
	}
	return a.openSessionIn(acc, orgs[0], addr, action)
}

// openSessionIn opens a session for acc in org.
func (a *App) openSessionIn(acc *store.Account, org *store.Organization, addr, action string) (string, Actor, error) {
	token, s, err := a.db.CreatePersonSession(acc.ID, org.ID, a.now())
	if err != nil {
		return "", Actor{}, notFound(err, "organization")
	}
	role, _ := ParseRole(s.Role)
	actor := personActor(s.Account, org, role).WithAddr(addr)
	a.audit(actor, action, acc.Email)
	return token, actor, nil
}

// SignInOIDC signs in the person whose email the identity provider
// vouched for: when emailVerified and the email is an account's, the
// account's pending invitations are accepted and a session opens in its
// first organization. An unverified or unknown email is Unauthenticated
// (counted against addr like a wrong password).
func (a *App) SignInOIDC(addr, email string, emailVerified bool) (string, Actor, error) {
	now := a.clock()
	if blocked, until := a.authFail.blocked(addr, now); blocked {
		return "", Actor{}, throttled("from this address", until, now)
	}
	if !emailVerified {
		a.authFail.fail(addr, now)
		return "", Actor{}, &Error{Kind: Unauthenticated, Msg: "the identity provider did not verify this email address"}
	}
	acc, err := a.db.FindAccountByEmail(normEmail(email))
	if errors.Is(err, store.ErrNotFound) {
		a.authFail.fail(addr, now)
		return "", Actor{}, &Error{Kind: Unauthenticated, Msg: "no account or invitation has this email address: ask an owner to invite you", Err: err}
	}
	if err != nil {
		return "", Actor{}, err
	}
	if _, err := a.db.UseAccountInvitations(acc.ID, now); err != nil {
		return "", Actor{}, err
	}
	return a.openPersonSession(acc, addr, "sign-in.oidc")
}

// SwitchOrganization makes orgID the current organization of the
// person's session of token and returns the Actor there. NotFound for an
// organization the person is no member of (or unknown); Unauthenticated
// for a session unknown or expired; Forbidden for a key's session.
func (a *App) SwitchOrganization(token, orgID string) (Actor, error) {
	actor, _, err := a.Session(token)
	if err != nil {
		return Actor{}, err
	}
	if actor.account == nil {
		return Actor{}, &Error{Kind: Forbidden, Msg: "a session of an API key stays in the key's organization"}
	}
	if err := a.db.SetSessionOrg(token, orgID, a.now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Actor{}, &Error{Kind: NotFound, Msg: "organization not found", Err: err}
		}
		return Actor{}, err
	}
	actor, _, err = a.Session(token)
	return actor, err
}

// OrgMembership is one organization of a person with their role there.
type OrgMembership struct {
	Org  *store.Organization
	Role Role
}

// Organizations returns the organizations the actor may switch to, by
// name, with its role in each: a person's memberships, a key's own
// organization, every organization for the operator.
func (a *App) Organizations(actor Actor) ([]OrgMembership, error) {
	switch {
	case actor.operator:
		orgs, err := a.db.ListOrganizations()
		if err != nil {
			return nil, err
		}
		out := make([]OrgMembership, len(orgs))
		for i, o := range orgs {
			out[i] = OrgMembership{Org: o, Role: RoleOwner}
		}
		return out, nil
	case actor.account != nil:
		ms, orgs, err := a.db.AccountMemberships(actor.account.ID)
		if err != nil {
			return nil, err
		}
		out := make([]OrgMembership, len(ms))
		for i := range ms {
			role, _ := ParseRole(ms[i].Role)
			out[i] = OrgMembership{Org: orgs[i], Role: role}
		}
		return out, nil
	}
	if err := Authorize(actor, Read); err != nil {
		return nil, err
	}
	return []OrgMembership{{Org: actor.org, Role: actor.Role()}}, nil
}

// Member is a person of an organization as the front ends show them.
type Member struct {
	ID           string // the membership's id: the member id of the API
	AccountID    string
	Email        string
	Role         Role
	CreatedAt    time.Time
	LastSignInAt *time.Time
	HasPassword  bool
	TOTP         bool
	// Pending: the person has not used their invitation yet, so the
	// membership gives no access.
	Pending bool
}

func newMember(m *store.Member) Member {
	role, _ := ParseRole(m.Role)
	return Member{ID: m.ID, AccountID: m.AccountID, Email: m.Account.Email, Role: role, CreatedAt: m.CreatedAt,
		LastSignInAt: m.Account.LastSignInAt, HasPassword: m.Account.PasswordHash != "", TOTP: m.Account.TOTPEnabled,
		Pending: !m.Accepted()}
}

// Members lists the people of the actor's organization, by email
// (ReadPeople: admins and owners).
func (a *App) Members(actor Actor) ([]Member, error) {
	if err := Authorize(actor, ReadPeople); err != nil {
		return nil, err
	}
	ms, err := a.db.ListMembers(actor.orgID())
	if err != nil {
		return nil, err
	}
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = newMember(m)
	}
	return out, nil
}

// AddMember makes the person of email a member of the actor's
// organization with role, creating their account when there is none, and
// returns the member and the token of their invitation link
// (<public-url>/invite/<token>, good for InvitationTTL, single use).
// Owners only (ManagePeople). Errors: Invalid for the email or role,
// Conflict for a member already.
func (a *App) AddMember(actor Actor, email, role string) (Member, string, error) {
	if err := Authorize(actor, ManagePeople); err != nil {
		return Member{}, "", err
	}
	r, err := ParseRole(role)
	clean, eerr := store.CleanEmail(email)
	switch {
	case eerr != nil && err != nil:
		return Member{}, "", invalid(eerr, FieldError{Field: "email", Message: AsError(eerr).Msg}, FieldError{Field: "role", Message: "must be owner, admin or viewer"})
	case eerr != nil:
		return Member{}, "", invalid(eerr, FieldError{Field: "email", Message: AsError(eerr).Msg})
	case err != nil:
		return Member{}, "", err
	}
	acc, err := a.db.FindAccountByEmail(clean)
	if errors.Is(err, store.ErrNotFound) {
		acc, err = a.db.CreateAccount(clean)
		if errors.Is(err, store.ErrConflict) { // created meanwhile
			acc, err = a.db.FindAccountByEmail(clean)
		}
	}
	if err != nil {
		return Member{}, "", err
	}
	m, err := a.db.AddMembership(actor.orgID(), acc.ID, r.String())
	if err != nil {
		return Member{}, "", err
	}
	token, _, err := a.db.CreateInvitation(store.InviteKind, actor.orgID(), acc.ID, a.now(), InvitationTTL)
	if err != nil {
		return Member{}, "", err
	}
	a.audit(actor, "member.add", clean+" as "+r.String())
	return newMember(&store.Member{Membership: *m, Account: acc}), token, nil
}

// SetRole gives member memberID of the actor's organization role and ends
// their sessions (owners only). NotFound for another organization's
// member; Conflict for the last owner's demotion.
func (a *App) SetRole(actor Actor, memberID, role string) (Member, error) {
	if err := Authorize(actor, ManagePeople); err != nil {
		return Member{}, err
	}
	r, err := ParseRole(role)
	if err != nil {
		return Member{}, err
	}
	if _, err := a.db.SetMemberRole(actor.orgID(), memberID, r.String()); err != nil {
		return Member{}, notFound(err, "member")
	}
	m, err := a.db.FindMember(actor.orgID(), memberID)
	if err != nil {
		return Member{}, notFound(err, "member")
	}
	a.audit(actor, "member.role", m.Account.Email+" to "+r.String())
	return newMember(m), nil
}

// RemoveMember removes member memberID from the actor's organization and
// ends their sessions (owners only); their account stays. NotFound for
// another organization's member; Conflict for the last owner.
func (a *App) RemoveMember(actor Actor, memberID string) (Member, error) {
	if err := Authorize(actor, ManagePeople); err != nil {
		return Member{}, err
	}
	m, err := a.db.RemoveMember(actor.orgID(), memberID)
	if err != nil {
		return Member{}, notFound(err, "member")
	}
	a.audit(actor, "member.remove", m.Account.Email)
	return newMember(m), nil
}

// ResetPassword makes a password-reset link for member memberID of the
// actor's organization (owners, and the operator) and returns its token
// (<public-url>/invite/<token>, good for ResetTTL, single use). The
// person's sessions end at once; their password works until the link is
// used. Forbidden for an owner when the person belongs to another
// organization too (only the operator resets them then).
func (a *App) ResetPassword(actor Actor, memberID string) (string, error) {
	if err := Authorize(actor, ManagePeople); err != nil {
		return "", err
	}
	m, err := a.db.FindMember(actor.orgID(), memberID)
	if err != nil {
		return "", notFound(err, "member")
	}
	if !actor.operator {
		// A reset link signs its holder in as the person: an owner may
		// not reach the person's other organizations with it.
		ms, _, err := a.db.AccountMemberships(m.AccountID)
		if err != nil {
			return "", err
		}
		for _, o := range ms {
			if o.OrgID != actor.orgID() {
				return "", &Error{Kind: Forbidden, Msg: m.Account.Email + " belongs to other organizations too: the operator resets their password (dmarcd user reset)"}
			}
		}
	}
	if err := a.db.EndAccountSessions(m.AccountID); err != nil {
		return "", err
	}
	token, _, err := a.db.CreateInvitation(store.ResetKind, actor.orgID(), m.AccountID, a.now(), ResetTTL)
	if err != nil {
		return "", err
	}
	a.audit(actor, "member.reset", m.Account.Email)
	return token, nil
}

// InvitationView is what the page of a one-time link shows, and what
// AcceptInvitation needs in its password field.
type InvitationView struct {
	Email     string
	OrgName   string
	ExpiresAt time.Time
	// Reset is a password-reset link (else an invitation).
	Reset bool
	// NeedsPassword: the form sets a new password (with a confirmation):
	// a reset, or an invitation of a person who has no password and no
	// organization yet.
	NeedsPassword bool
	// CurrentPassword: the person has a password already; the form asks
	// for it, so that the link alone does not sign anyone in as them.
	CurrentPassword bool
	// SingleSignOn: the person signs in with single sign-on only; they
	// accept by signing in that way (SignInOIDC), not with the link.
	SingleSignOn bool
}

// Invitation returns what the page of link token shows; NotFound for a
// token unknown, used or expired (one message).
func (a *App) Invitation(token string) (InvitationView, error) {
	inv, acc, org, err := a.db.FindInvitation(token, a.clock())
	if err != nil {
		return InvitationView{}, notFoundLink(err)
	}
	v := InvitationView{Email: acc.Email, OrgName: org.Name, ExpiresAt: inv.ExpiresAt, Reset: inv.Kind == store.ResetKind}
	switch {
	case v.Reset:
		v.NeedsPassword = true
	case acc.PasswordHash != "":
		v.CurrentPassword = true
	default:
		ms, _, err := a.db.AccountMemberships(acc.ID)
		if err != nil {
			return InvitationView{}, err
		}
		v.SingleSignOn = len(ms) > 0
		v.NeedsPassword = !v.SingleSignOn
	}
	return v, nil
}

func notFoundLink(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: "this link is unknown, used or expired: ask for a new one", Err: err}
	}
	return err
}

// errLinkChanged is a link whose person changed between the page and the
// form (a password set meanwhile): show the page again.
var errLinkChanged = &Error{Kind: Conflict, Msg: "this account changed meanwhile: open the link again"}

// AcceptInvitation uses the one-time link token from client address addr
// and signs the person in to the link's organization, accepting their
// membership there. What password is depends on the link
// (InvitationView): a new password for a reset, or for a person with no
// password and no organization yet (MinPasswordLen and up, else Invalid
// naming password; a reset also ends the person's other sessions); the
// person's current password when they have one (Unauthenticated when
// wrong, counted like a failed sign-in); a person of single sign-on only
// is Forbidden (they accept by signing in that way). NotFound for a token
// unknown, used or expired.
//
// A person with TOTP gives a code (or a recovery code) as totp beside
// their current password: TOTPRequired without one, as at sign-in.
func (a *App) AcceptInvitation(addr, token, password string, totp ...string) (string, Actor, error) {
	now := a.clock()
	if blocked, until := a.authFail.blocked(addr, now); blocked {
		return "", Actor{}, throttled("from this address", until, now)
	}
	view, err := a.Invitation(token)
	if err != nil {
		if KindOf(err) == NotFound {
			a.authFail.fail(addr, now)
		}
		return "", Actor{}, err
	}
	hash := ""
	switch {
	case view.SingleSignOn:
		return "", Actor{}, &Error{Kind: Forbidden, Msg: "you sign in with single sign-on: do so to accept this invitation"}
	case view.CurrentPassword:
		if blocked, until := a.accountFail.blocked(view.Email, now); blocked {
			return "", Actor{}, throttled("for this account", until, now)
		}
		acc, err := a.db.FindAccountByEmail(view.Email)
		if err != nil {
			return "", Actor{}, notFoundLink(err)
		}
		if !a.verifyPassword(acc.PasswordHash, password) {
			a.authFail.fail(addr, now)
			a.accountFail.fail(view.Email, now)
			a.auditAccount(acc, "sign-in.fail", addr)
			return "", Actor{}, &Error{Kind: Unauthenticated, Msg: "wrong password: enter the password of " + view.Email}
		}
		if acc.TOTPEnabled {
			if len(totp) == 0 || totp[0] == "" {
				return "", Actor{}, errTOTPRequired
			}
			if _, err := a.useSecondFactor(acc, totp[0], now); err != nil {
				if KindOf(err) == Unauthenticated {
					a.authFail.fail(addr, now)
					a.accountFail.fail(view.Email, now)
				}
				return "", Actor{}, err
			}
		}
	case view.NeedsPassword:
		if err := checkPassword("password", password); err != nil {
			return "", Actor{}, err
		}
		hash = a.hashPassword(password)
	}
	inv, acc, org, err := a.db.UseInvitation(token, now, view.Reset, func(inv *store.Invitation, acc *store.Account) error {
		if inv.Kind == store.InviteKind && (acc.PasswordHash != "") != view.CurrentPassword {
			return errLinkChanged
		}
		if hash != "" {
			acc.PasswordHash = hash
		}
		return nil
	})
	if err != nil {
		return "", Actor{}, notFoundLink(err)
	}
	action := "invitation.accept"
	if inv.Kind == store.ResetKind {
		action = "password.reset"
	}
	return a.openSessionIn(acc, org, addr, action)
}

// BeginTOTP starts the actor's TOTP enrolment: a new secret (base32) and
// its otpauth:// URL for an authenticator app. Nothing changes at sign-in
// until ConfirmTOTP. People only (ManageOwnAccount).
func (a *App) BeginTOTP(actor Actor) (secret, url string, err error) {
	if err := Authorize(actor, ManageOwnAccount); err != nil {
		return "", "", err
	}
	secret = newTOTPSecret()
	if _, err := a.db.UpdateAccount(actor.account.ID, false, func(acc *store.Account) error {
		acc.TOTPPending = secret
		return nil
	}); err != nil {
		return "", "", err
	}
	return secret, otpauthURL(actor.account.Email, secret), nil
}

// ConfirmTOTP turns TOTP on when code is right for the secret BeginTOTP
// gave, and returns the recovery codes, shown this once (each works once
// in place of a code). Invalid naming totp for a wrong code or no
// enrolment begun.
func (a *App) ConfirmTOTP(actor Actor, code string) ([]string, error) {
	if err := Authorize(actor, ManageOwnAccount); err != nil {
		return nil, err
	}
	codes, hashes := newRecoveryCodes(10)
	now := a.clock()
	_, err := a.db.UpdateAccount(actor.account.ID, false, func(acc *store.Account) error {
		if acc.TOTPPending == "" {
			return invalid(nil, FieldError{Field: "totp", Message: "start the enrolment first"})
		}
		step := totpCheck(acc.TOTPPending, code, now, 0)
		if step < 0 {
			return invalid(nil, FieldError{Field: "totp", Message: "is not the code the app shows now"})
		}
		acc.TOTPSecret, acc.TOTPPending, acc.TOTPEnabled = acc.TOTPPending, "", true
		acc.TOTPLastStep, acc.RecoveryHashes = step, hashes
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.audit(actor, "totp.enable", actor.account.Email)
	return codes, nil
}

// DisableTOTP turns the actor's TOTP off, given a current code or a
// recovery code. Invalid naming totp for a wrong code.
func (a *App) DisableTOTP(actor Actor, code string) error {
	if err := Authorize(actor, ManageOwnAccount); err != nil {
		return err
	}
	now := a.clock()
	_, err := a.db.UpdateAccount(actor.account.ID, false, func(acc *store.Account) error {
		if !acc.TOTPEnabled {
			return nil
		}
		ok := false
		if isRecoveryCode(code) {
			ok = slices.Contains(acc.RecoveryHashes, recoveryHash(code))
		} else {
			ok = totpCheck(acc.TOTPSecret, code, now, acc.TOTPLastStep) >= 0
		}
		if !ok {
			return invalid(nil, FieldError{Field: "totp", Message: "is not a right code"})
		}
		acc.TOTPSecret, acc.TOTPPending, acc.TOTPEnabled, acc.TOTPLastStep, acc.RecoveryHashes = "", "", false, 0, nil
		return nil
	})
	if err != nil {
		return err
	}
	a.audit(actor, "totp.disable", actor.account.Email)
	return nil
}

// InviteLink is the URL of one-time link token: <public-url>/invite/<token>,
// or base (the request's scheme and host) without a public URL.
func (a *App) InviteLink(base, token string) string {
	u := a.cfg.PublicURL
	if u == "" {
		u = base
	}
	return strings.TrimRight(u, "/") + "/invite/" + token
}
