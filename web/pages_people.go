package web

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
)

// People, organizations and accounts (issue 26): the header's
// organization switcher, the operator view /orgs, the people of an
// organization (owners invite, change roles, remove), a person's account
// (TOTP), the audit log, and the invitation page /invite/{token}. Every
// operation is the application layer's, which checks the role; the pages
// show a control only to a role that may use it.

func (h *Handler) peopleRoutes() {
	h.handle("GET", "/orgs", app.Read, h.orgs)
	h.handle("POST", "/orgs/switch", app.Read, h.switchOrg)
	h.handle("GET", "/settings/people", app.ReadPeople, h.people)
	h.handle("POST", "/settings/people", app.ManagePeople, h.invite)
	h.handle("POST", "/settings/people/:id/role", app.ManagePeople, h.setRole)
	h.handle("POST", "/settings/people/:id/remove", app.ManagePeople, h.removeMember)
	h.handle("GET", "/settings/account", app.ManageOwnAccount, h.account)
	h.handle("POST", "/settings/account/totp", app.ManageOwnAccount, h.beginTOTP)
	h.handle("POST", "/settings/account/totp/confirm", app.ManageOwnAccount, h.confirmTOTP)
	h.handle("POST", "/settings/account/totp/disable", app.ManageOwnAccount, h.disableTOTP)
	h.handle("GET", "/settings/audit", app.ReadAudit, h.audit)
	h.router.GET("/invite/:token", h.getInvite)
	h.router.POST("/invite/:token", h.postInvite)
}

// fillPerson sets the layout's person, role, rights and, for people in
// several organizations, the switcher.
func (h *Handler) fillPerson(l *layout, r *req) {
	p := r.actor.Person()
	if p == nil {
		return
	}
	l.Person, l.Role = p.Email, r.actor.Role().String()
	l.People = app.Authorize(r.actor, app.ReadPeople) == nil
	l.Audit = app.Authorize(r.actor, app.ReadAudit) == nil
	orgs, err := h.app.Organizations(r.actor)
	if err != nil {
		h.log.Error("listing a person's organizations", "error", err)
		return
	}
	if len(orgs) < 2 {
		return
	}
	for _, m := range orgs {
		l.Orgs = append(l.Orgs, orgChoice{ID: m.Org.ID, Name: m.Org.Name, Current: m.Org.ID == r.orgID()})
	}
}

// orgRow is one organization of the operator view.
type orgRow struct {
	ID, Name, Role string
	Domains        []string // names, the first maxOrgDomains
	DomainCount    int
	Messages       int64
	PassRate       float64
	OpenAlerts     int
	Current        bool
}

type orgsPage struct{ Rows []orgRow }

// maxOrgDomains is how many domain names a row of /orgs lists.
const maxOrgDomains = 5

func (h *Handler) orgs(w http.ResponseWriter, r *req) error {
	if r.actor.Person() == nil {
		return errNotFound // a key's session has one organization
	}
	view, err := h.app.OperatorView(r.actor)
	if err != nil {
		return err
	}
	var p orgsPage
	for _, o := range view {
		row := orgRow{ID: o.Org.ID, Name: o.Org.Name, Role: o.Role.String(), DomainCount: len(o.Domains),
			Messages: o.Messages, PassRate: o.PassRate, OpenAlerts: o.OpenAlerts, Current: o.Org.ID == r.orgID()}
		for _, d := range o.Domains[:min(len(o.Domains), maxOrgDomains)] {
			row.Domains = append(row.Domains, d.Domain.Name)
		}
		p.Rows = append(p.Rows, row)
	}
	h.render(w, r, http.StatusOK, "orgs", "Your organizations", p)
	return nil
}

// switchOrg moves the session to another organization of the person; an
// organization not theirs is not found.
func (h *Handler) switchOrg(w http.ResponseWriter, r *req) error {
	c, err := r.Cookie(CookieName)
	if err != nil || r.actor.Person() == nil {
		return errNotFound // a key's session has one organization
	}
	if _, err := h.app.SwitchOrganization(c.Value, r.PostForm.Get("org")); err != nil {
		return err
	}
	next := safeNext(r.PostForm.Get("next"))
	if next == "/" {
		// The page the person was on, when it is a list that every
		// organization has; an id of the old organization would be 404.
		if ref, err := url.Parse(r.Referer()); err == nil && orgNeutral(ref.Path) {
			next = ref.Path
		}
	}
	http.Redirect(w, r.Request, next, http.StatusSeeOther)
	return nil
}

// orgNeutral reports whether path is a page every organization has.
func orgNeutral(path string) bool {
	switch path {
	case "/", "/reports", "/alerts", "/tls-reports", "/forensic", "/settings", "/settings/keys",
		"/settings/webhooks", "/settings/mailboxes", "/settings/people", "/settings/account", "/settings/audit", "/orgs":
		return true
	}
	return false
}

// memberRow is one person of the people page.
type memberRow struct {
	ID, Email, Role string
	CreatedAt       time.Time
	LastSignIn      *time.Time
	TOTP, Me        bool
}

// invited is an invitation just made: its link is shown once.
type invited struct {
	Email, Role, Link string
	Expires           time.Time
}

type peoplePage struct {
	Members       []memberRow
	Manage        bool
	Roles         []string
	Email, Role   string // the invite form's values
	Invited       *invited
	Notice, Error string
	OIDC          string
}

var roleNames = []string{app.RoleViewer.String(), app.RoleAdmin.String(), app.RoleOwner.String()}

func (h *Handler) peoplePage(r *req) (peoplePage, error) {
	p := peoplePage{Manage: app.Authorize(r.actor, app.ManagePeople) == nil, Roles: roleNames, Role: app.RoleViewer.String()}
	if h.oidc != nil {
		p.OIDC = h.oidc.cfg.Name
	}
	ms, err := h.app.Members(r.actor)
	if err != nil {
		return p, err
	}
	me := ""
	if pr := r.actor.Person(); pr != nil {
		me = pr.ID
	}
	for _, m := range ms {
		p.Members = append(p.Members, memberRow{ID: m.ID, Email: m.Email, Role: m.Role.String(), CreatedAt: m.CreatedAt,
			LastSignIn: m.LastSignInAt, TOTP: m.TOTP, Me: m.AccountID == me})
	}
	return p, nil
}

func (h *Handler) people(w http.ResponseWriter, r *req) error {
	p, err := h.peoplePage(r)
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("done") {
	case "role":
		p.Notice = "Role changed. That person's sessions ended: their next sign-in has the new role."
	case "removed":
		p.Notice = "Removed: they no longer reach this organization, and their sessions ended."
	}
	h.render(w, r, http.StatusOK, "people", "People", p)
	return nil
}

func (h *Handler) invite(w http.ResponseWriter, r *req) error {
	email, role := strings.TrimSpace(r.PostForm.Get("email")), r.PostForm.Get("role")
	m, token, err := h.app.AddMember(r.actor, email, role)
	p, perr := h.peoplePage(r)
	if perr != nil {
		return perr
	}
	if err != nil {
		status, msg, ferr := formFailure(err)
		if ferr != nil {
			return ferr
		}
		p.Email, p.Role, p.Error = email, role, msg
		h.render(w, r, status, "people", "People", p)
		return nil
	}
	p.Invited = &invited{Email: m.Email, Role: m.Role.String(), Link: h.publicBase(r.Request) + "/invite/" + token,
		Expires: h.now().Add(app.InvitationTTL)}
	h.render(w, r, http.StatusOK, "people", "People", p)
	return nil
}

// publicBase is the URL people reach this server by, for links handed
// over: --public-url, else this request's origin.
func (h *Handler) publicBase(r *http.Request) string { return h.origin(r) }

func (h *Handler) setRole(w http.ResponseWriter, r *req) error {
	if _, err := h.app.SetRole(r.actor, r.params.ByName("id"), r.PostForm.Get("role")); err != nil {
		return h.peopleFailure(w, r, err)
	}
	http.Redirect(w, r.Request, "/settings/people?done=role", http.StatusSeeOther)
	return nil
}

func (h *Handler) removeMember(w http.ResponseWriter, r *req) error {
	if _, err := h.app.RemoveMember(r.actor, r.params.ByName("id")); err != nil {
		return h.peopleFailure(w, r, err)
	}
	http.Redirect(w, r.Request, "/settings/people?done=removed", http.StatusSeeOther)
	return nil
}

// peopleFailure shows the people page again with why a change failed
// (the last owner cannot leave, say).
func (h *Handler) peopleFailure(w http.ResponseWriter, r *req, err error) error {
	status, msg, ferr := formFailure(err)
	if ferr != nil {
		return ferr
	}
	p, perr := h.peoplePage(r)
	if perr != nil {
		return perr
	}
	p.Error = msg
	h.render(w, r, status, "people", "People", p)
	return nil
}

// totpSetup is the enrollment in progress.
type totpSetup struct {
	Secret, URL string
	QR          any
}

type accountPage struct {
	Email         string
	TOTP          bool
	Setup         *totpSetup
	Codes         []string
	Notice, Error string
}

func (h *Handler) accountPage(r *req) (accountPage, error) {
	p := r.actor.Person()
	if p == nil {
		return accountPage{}, errNotFound // a key's session has no account
	}
	return accountPage{Email: p.Email, TOTP: p.TOTPEnabled}, nil
}

func (h *Handler) account(w http.ResponseWriter, r *req) error {
	p, err := h.accountPage(r)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("done") == "totp-off" {
		p.Notice = "Two-step sign-in is off: signing in asks for the password alone."
	}
	h.render(w, r, http.StatusOK, "account", "Your account", p)
	return nil
}

func (h *Handler) beginTOTP(w http.ResponseWriter, r *req) error {
	p, err := h.accountPage(r)
	if err != nil {
		return err
	}
	secret, uri, err := h.app.BeginTOTP(r.actor)
	if err != nil {
		return h.accountFailure(w, r, p, err)
	}
	p.Setup = &totpSetup{Secret: secret, URL: uri, QR: qrSVG(uri)}
	h.render(w, r, http.StatusOK, "account", "Your account", p)
	return nil
}

func (h *Handler) confirmTOTP(w http.ResponseWriter, r *req) error {
	p, err := h.accountPage(r)
	if err != nil {
		return err
	}
	codes, err := h.app.ConfirmTOTP(r.actor, strings.TrimSpace(r.PostForm.Get("code")))
	if err != nil {
		// The enrolment waits server-side: the form carries its secret
		// and link back to show them again, if they are still the
		// pending ones.
		if secret, uri := r.PostForm.Get("secret"), r.PostForm.Get("url"); secret != "" &&
			equalToken(secret, r.actor.Person().TOTPPending) && strings.HasPrefix(uri, "otpauth://totp/") {
			p.Setup = &totpSetup{Secret: secret, URL: uri, QR: qrSVG(uri)}
		}
		return h.accountFailure(w, r, p, err)
	}
	p.TOTP, p.Codes = true, codes
	h.render(w, r, http.StatusOK, "account", "Your account", p)
	return nil
}

func (h *Handler) disableTOTP(w http.ResponseWriter, r *req) error {
	p, err := h.accountPage(r)
	if err != nil {
		return err
	}
	if err := h.app.DisableTOTP(r.actor, strings.TrimSpace(r.PostForm.Get("code"))); err != nil {
		return h.accountFailure(w, r, p, err)
	}
	http.Redirect(w, r.Request, "/settings/account?done=totp-off", http.StatusSeeOther)
	return nil
}

func (h *Handler) accountFailure(w http.ResponseWriter, r *req, p accountPage, err error) error {
	status, msg, ferr := formFailure(err)
	if ferr != nil {
		if app.KindOf(err) != app.Unauthenticated {
			return ferr
		}
		status, msg = http.StatusUnprocessableEntity, "That code did not work. Enter the code your app shows now."
	}
	p.Error = msg
	h.render(w, r, status, "account", "Your account", p)
	return nil
}

// auditRow is one entry of the audit log page.
type auditRow struct {
	At                        time.Time
	Actor, Action, Target, IP string
}

type auditPage struct {
	Entries                 []auditRow
	Actor, Action, From, To string
	Actions                 []string
	Filtered                bool
	Error                   string
	First, Next             string
}

// auditRows is how many entries one page of the audit log shows.
const auditRows = 50

func (h *Handler) audit(w http.ResponseWriter, r *req) error {
	q := r.URL.Query()
	p := auditPage{Actor: strings.TrimSpace(q.Get("actor")), Action: q.Get("action"), Actions: auditActions}
	f := app.AuditFilter{Actor: p.Actor, Action: p.Action, Cursor: q.Get("cursor"), Limit: auditRows}
	from, fv, err1 := dateParam(q, "from")
	to, tv, err2 := dateParam(q, "to")
	p.From, p.To = fv, tv
	if err := errors.Join(err1, err2); err != nil {
		p.Error = "Dates are written 2026-11-20."
	}
	if from != nil {
		f.From = *from
	}
	if to != nil {
		f.To = to.Add(day) // the whole day
	}
	p.Filtered = p.Actor != "" || p.Action != "" || from != nil || to != nil
	page, err := h.app.AuditLog(r.actor, f)
	if err != nil {
		status, msg, ferr := formFailure(err)
		if ferr != nil {
			return ferr
		}
		p.Error = msg
		h.render(w, r, status, "audit", "Audit log", p)
		return nil
	}
	next := page.NextCursor
	for _, e := range page.Entries {
		p.Entries = append(p.Entries, auditRow{At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target, IP: e.IP})
	}
	link := func(cursor string) string {
		v := url.Values{}
		for _, k := range []string{"actor", "action", "from", "to"} {
			if x := q.Get(k); x != "" {
				v.Set(k, x)
			}
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		if len(v) == 0 {
			return "/settings/audit"
		}
		return "/settings/audit?" + v.Encode()
	}
	if next != "" {
		p.Next = link(next)
	}
	if f.Cursor != "" {
		p.First = link("")
	}
	h.render(w, r, http.StatusOK, "audit", "Audit log", p)
	return nil
}

// invitePage is the data of /invite/{token}.
type invitePage struct {
	Token, Email, Org string
	Error, CSRF       string
	OIDC              string
	// Passwords: the form sets a password (the account has none, or
	// this is a reset) and passwords are not turned off.
	Passwords bool
	// Reset is a password-reset link.
	Reset bool
	// NeedsPassword: the link sets a new password (a reset, or a person
	// without one): password and password_confirm.
	NeedsPassword bool
	// CurrentPassword: the person has a password; the form asks for it
	// (and for a TOTP code, TOTP, once the server said it is needed).
	CurrentPassword, TOTP bool
	// SingleSignOn: the person accepts by signing in with the provider.
	SingleSignOn bool
	MinLen       int
}

// auditActions are the actions the audit log records (docs/people.md),
// for the filter.
var auditActions = []string{"sign-in", "sign-in.oidc", "sign-in.fail", "domain.create", "domain.delete",
	"key.create", "key.revoke", "webhook.create", "webhook.delete", "mailbox.create", "mailbox.delete",
	"alert.dismiss", "member.add", "member.role", "member.remove", "member.reset", "invitation.accept",
	"password.reset", "totp.enable", "totp.disable"}

// errInvitation is the page of an unknown, used or expired invitation:
// one page for all three, which says nothing of whom it was for.
var errInvitation = &pageError{status: http.StatusNotFound, title: "This invitation does not work",
	msg: "The link is wrong, was already used, or is older than 7 days. Ask whoever invited you for a new one."}

func (h *Handler) invitationPage(w http.ResponseWriter, r *http.Request, token string) (invitePage, bool) {
	inv, err := h.app.Invitation(token)
	if err != nil {
		if k := app.KindOf(err); k != app.NotFound && k != app.Unauthenticated && k != app.Invalid {
			h.errorPage(w, nil, err)
			return invitePage{}, false
		}
		h.errorPage(w, nil, errInvitation)
		return invitePage{}, false
	}
	p := invitePage{Token: token, Email: inv.Email, Org: inv.OrgName, Reset: inv.Reset, NeedsPassword: inv.NeedsPassword,
		CurrentPassword: inv.CurrentPassword, SingleSignOn: inv.SingleSignOn,
		Passwords: (inv.NeedsPassword || inv.CurrentPassword) && (h.oidc == nil || !h.oidc.cfg.Only), MinLen: app.MinPasswordLen}
	if h.oidc != nil {
		p.OIDC = h.oidc.cfg.Name
	}
	p.CSRF = h.loginCSRF(w, r)
	return p, true
}

func (h *Handler) getInvite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	p, ok := h.invitationPage(w, r, ps.ByName("token"))
	if !ok {
		return
	}
	h.render(w, nil, http.StatusOK, "invite", "Join "+p.Org, p)
}

// postInvite sets the invited person's password and signs them in.
func (h *Handler) postInvite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	addr := clientaddr.Of(r)
	if m := h.checkOrigin(r); m != nil {
		h.log.Warn("invitation refused", "reason", m.reason, "origin", m.got, "expected", m.want, "remote", addr)
		h.errorPage(w, nil, m.page())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	_ = r.ParseForm()
	p, ok := h.invitationPage(w, r, ps.ByName("token"))
	if !ok {
		return
	}
	c, err := r.Cookie(loginCookie)
	if got := r.PostForm.Get("csrf_token"); err != nil || got == "" || !equalToken(got, c.Value) {
		p.Error = "This form is stale or came from another site. Enter the password again."
		h.render(w, nil, http.StatusForbidden, "invite", "Join "+p.Org, p)
		return
	}
	if !p.Passwords {
		p.Error = "Passwords are turned off on this server: join with " + p.OIDC + "."
		h.render(w, nil, http.StatusForbidden, "invite", "Join "+p.Org, p)
		return
	}
	pw := r.PostForm.Get("password")
	if p.NeedsPassword && pw != r.PostForm.Get("password_confirm") {
		p.Error = "The two passwords differ. Enter the same password twice."
		h.render(w, nil, http.StatusUnprocessableEntity, "invite", "Join "+p.Org, p)
		return
	}
	token, actor, err := h.app.AcceptInvitation(addr, ps.ByName("token"), pw, strings.TrimSpace(r.PostForm.Get("totp")))
	if err != nil {
		switch e := app.AsError(err); e.Kind {
		case app.Invalid:
			p.Error = e.Msg
			h.render(w, nil, http.StatusUnprocessableEntity, "invite", "Join "+p.Org, p)
		case app.TOTPRequired:
			// The right password of an account with TOTP: ask for the
			// code with it.
			p.TOTP = true
			if r.PostForm.Get("totp") != "" {
				p.Error = "That code did not work. Enter the current code of your authenticator app, or a recovery code."
			}
			h.render(w, nil, http.StatusOK, "invite", "Join "+p.Org, p)
		case app.Unauthenticated:
			p.TOTP = r.PostForm.Get("totp") != ""
			if p.TOTP {
				p.Error = "That password or code did not work. Enter both again."
			} else {
				p.Error = "That is not the password of " + p.Email + "."
			}
			h.render(w, nil, http.StatusUnauthorized, "invite", "Join "+p.Org, p)
		case app.Throttled:
			w.Header().Set("Retry-After", retryAfter(e.RetryAfter))
			p.Error = "Too many failed attempts. Wait a minute and try again."
			h.render(w, nil, http.StatusTooManyRequests, "invite", "Join "+p.Org, p)
		case app.Forbidden:
			p.Error = "You sign in with single sign-on: use the button above to accept."
			h.render(w, nil, http.StatusForbidden, "invite", "Join "+p.Org, p)
		case app.NotFound:
			h.errorPage(w, nil, errInvitation)
		default:
			h.errorPage(w, nil, err)
		}
		return
	}
	h.log.Info("invitation accepted", "account_id", actor.Person().ID, "org_id", actor.Org().ID, "remote", addr)
	h.setCookie(w, r, token)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
