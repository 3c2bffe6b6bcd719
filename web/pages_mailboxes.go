package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/dmarcd/dmarcd/app"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/store"
)

// The mailbox pages (Settings -> Mailboxes): list, add, edit, activate,
// poll now and delete an organization's IMAP mailboxes. Every change goes
// through the application layer's mailbox operations, as the API's do
// (defaults, the address and plaintext policy, the connection and login
// tried before saving, sealed credentials), and their errors are shown in
// the API's words. Credentials never reach a page: store.Mailbox has no field for
// them, and a form shown again after an error leaves its secret fields
// empty.

func (h *Handler) mailboxRoutes() {
	h.handle("GET", "/settings/mailboxes", app.Read, h.mailboxes)
	h.handle("POST", "/settings/mailboxes", app.Write, h.createMailbox)
	h.handle("GET", "/settings/mailboxes/:id", app.Read, h.mailbox)
	h.handle("POST", "/settings/mailboxes/:id", app.Write, h.updateMailbox)
	h.handle("POST", "/settings/mailboxes/:id/poll", app.Write, h.pollMailbox)
	h.handle("POST", "/settings/mailboxes/:id/delete", app.Write, h.deleteMailbox)
}

// mailboxForm is what a mailbox form shows again: never a secret.
type mailboxForm struct {
	Host, Port, Security, Username, Auth string
	Folder, ArchiveFolder                string
	TokenURL, ClientID, Scope            string
}

type mailboxesPage struct {
	Boxes  []*store.Mailbox
	Form   mailboxForm
	Error  string
	Notice string
	// PlainAllowed is whether the server takes security "plain".
	PlainAllowed bool
}

type mailboxPage struct {
	Box          *store.Mailbox
	Form         mailboxForm
	Error        string // of a poll or an activation, shown with the status
	EditError    string // of the edit form, shown with it
	Notice       string
	Polled       *imapin.PollResult
	PlainAllowed bool
}

// errNoMailboxService is the page of a server built without IMAP intake.
var errNoMailboxService = &pageError{status: http.StatusServiceUnavailable, title: "Mailboxes unavailable",
	msg: "This server runs without its mailbox service, so mailboxes can be looked at but not changed."}

// canChange is errNoMailboxService when the server has no IMAP intake.
func (h *Handler) canChange() error {
	if !h.app.MailboxesEnabled() {
		return errNoMailboxService
	}
	return nil
}

func (h *Handler) plainAllowed() bool { return h.app.AllowPlaintext() }

// newMailboxForm is the add form's defaults (the application layer's).
func newMailboxForm() mailboxForm {
	return mailboxForm{Security: store.SecurityTLS, Auth: store.AuthPassword, Folder: "INBOX",
		ArchiveFolder: app.DefaultArchiveFolder}
}

// formOf is the edit form of m.
func formOf(m *store.Mailbox) mailboxForm {
	return mailboxForm{Host: m.Host, Port: strconv.Itoa(m.Port), Security: m.Security, Username: m.Username,
		Auth: m.Auth, Folder: m.Folder, ArchiveFolder: m.ArchiveFolder}
}

func (h *Handler) mailboxesData(r *req) (mailboxesPage, error) {
	boxes, _, err := h.app.ListMailboxes(r.Context(), r.actor, store.Page{Page: 1, Limit: 1000})
	return mailboxesPage{Boxes: boxes, Form: newMailboxForm(), PlainAllowed: h.plainAllowed()}, err
}

func (h *Handler) mailboxes(w http.ResponseWriter, r *req) error {
	p, err := h.mailboxesData(r)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("done") == "deleted" {
		p.Notice = "The mailbox is deleted. Its mail stays where it is; reports already read stay stored."
	}
	h.render(w, r, http.StatusOK, "mailboxes", "Mailboxes", p)
	return nil
}

// readMailboxForm reads a posted mailbox form into what it shows again
// and the spec for the mailbox operations. old is the mailbox being edited, nil for
// a new one: then absent fields take the service's defaults; on an edit,
// blank secret fields keep the stored credentials.
func readMailboxForm(r *req, old *store.Mailbox) (mailboxForm, app.MailboxSpec, error) {
	pf := r.PostForm
	f := mailboxForm{Host: strings.TrimSpace(pf.Get("host")), Port: strings.TrimSpace(pf.Get("port")),
		Security: pf.Get("security"), Username: strings.TrimSpace(pf.Get("username")), Auth: pf.Get("auth"),
		Folder: strings.TrimSpace(pf.Get("folder")), ArchiveFolder: strings.TrimSpace(pf.Get("archive_folder")),
		TokenURL: strings.TrimSpace(pf.Get("token_url")), ClientID: strings.TrimSpace(pf.Get("client_id")),
		Scope: strings.TrimSpace(pf.Get("scope"))}
	var sp app.MailboxSpec
	sp.Host, sp.Username, sp.ArchiveFolder = &f.Host, &f.Username, &f.ArchiveFolder
	if f.Security != "" {
		sp.Security = &f.Security
	}
	if f.Auth != "" {
		sp.Auth = &f.Auth
	}
	if f.Folder != "" {
		sp.Folder = &f.Folder
	}
	// The port is sent only when given (a new mailbox) or changed (an
	// edit), so that it follows a change of security as the API's does.
	if f.Port != "" && (old == nil || f.Port != strconv.Itoa(old.Port)) {
		n, err := strconv.Atoi(f.Port)
		if err != nil {
			return f, sp, app.InvalidField("port", "must be a number between 1 and 65535")
		}
		sp.Port = &n
	}
	auth := f.Auth
	if auth == "" && old != nil {
		auth = old.Auth
	}
	switch auth {
	case store.AuthOAuth2:
		o := imapin.OAuth2Config{TokenURL: f.TokenURL, ClientID: f.ClientID, Scope: f.Scope,
			ClientSecret: pf.Get("client_secret"), RefreshToken: pf.Get("refresh_token")}
		// On an edit of an OAuth2 mailbox, all blank keeps the stored sign-in.
		if old == nil || old.Auth != store.AuthOAuth2 || o != (imapin.OAuth2Config{Scope: o.Scope}) {
			sp.OAuth2 = &o
		}
	default:
		if pw := pf.Get("password"); pw != "" || old == nil || old.Auth != store.AuthPassword {
			sp.Password = &pw
		}
	}
	return f, sp, nil
}

func (h *Handler) createMailbox(w http.ResponseWriter, r *req) error {
	if err := h.canChange(); err != nil {
		return err
	}
	f, sp, err := readMailboxForm(r, nil)
	if err == nil {
		var m *store.Mailbox
		if m, err = h.app.CreateMailbox(r.Context(), r.actor, sp); err == nil {
			http.Redirect(w, r.Request, "/settings/mailboxes/"+m.ID+"?done=created", http.StatusSeeOther)
			return nil
		}
	}
	status, msg, ferr := formFailure(err)
	if ferr != nil {
		return ferr
	}
	p, lerr := h.mailboxesData(r)
	if lerr != nil {
		return lerr
	}
	p.Form, p.Error = f, msg
	h.render(w, r, status, "mailboxes", "Mailboxes", p)
	return nil
}

func (h *Handler) findMailbox(r *req) (*store.Mailbox, error) {
	return h.app.FindMailbox(r.Context(), r.actor, strings.ToLower(r.params.ByName("id")))
}

func (h *Handler) mailbox(w http.ResponseWriter, r *req) error {
	m, err := h.findMailbox(r)
	if err != nil {
		return err
	}
	p := mailboxPage{Box: m, Form: formOf(m), PlainAllowed: h.plainAllowed()}
	switch r.URL.Query().Get("done") {
	case "created":
		p.Notice = "The mailbox is added: the connection and sign-in worked. It is polled every few minutes, and at once when the server announces new mail."
	case "updated":
		p.Notice = "Saved."
	case "activated":
		p.Notice = "The mailbox is active again: the connection and sign-in worked."
	case "deactivated":
		p.Notice = "The mailbox is inactive: it is not polled until activated again."
	}
	h.render(w, r, http.StatusOK, "mailbox", "Mailbox "+m.Username, p)
	return nil
}

func (h *Handler) updateMailbox(w http.ResponseWriter, r *req) error {
	if err := h.canChange(); err != nil {
		return err
	}
	old, err := h.findMailbox(r)
	if err != nil {
		return err
	}
	var f mailboxForm
	var sp app.MailboxSpec
	done, edit := "updated", true
	switch a := r.PostForm.Get("action"); a {
	case "activate", "deactivate":
		v := a == "activate"
		sp.IsActive, f, done, edit = &v, formOf(old), a+"d", false
	default:
		if f, sp, err = readMailboxForm(r, old); err != nil {
			break
		}
	}
	if err == nil {
		if _, err = h.app.UpdateMailbox(r.Context(), r.actor, old.ID, sp); err == nil {
			http.Redirect(w, r.Request, "/settings/mailboxes/"+old.ID+"?done="+done, http.StatusSeeOther)
			return nil
		}
	}
	status, msg, ferr := formFailure(err)
	if ferr != nil {
		return ferr
	}
	p := mailboxPage{Box: old, Form: f, PlainAllowed: h.plainAllowed()}
	if edit {
		p.EditError = msg
	} else {
		p.Error = msg
	}
	h.render(w, r, status, "mailbox", "Mailbox "+old.Username, p)
	return nil
}

func (h *Handler) pollMailbox(w http.ResponseWriter, r *req) error {
	if err := h.canChange(); err != nil {
		return err
	}
	id := strings.ToLower(r.params.ByName("id"))
	res, err := h.app.PollMailbox(r.Context(), r.actor, id)
	if err != nil {
		status, msg, ferr := formFailure(err)
		if ferr != nil {
			return ferr
		}
		m, err := h.findMailbox(r)
		if err != nil {
			return err
		}
		h.render(w, r, status, "mailbox", "Mailbox "+m.Username, mailboxPage{Box: m, Form: formOf(m), Error: msg, PlainAllowed: h.plainAllowed()})
		return nil
	}
	m, err := h.findMailbox(r) // with the status the poll recorded
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, "mailbox", "Mailbox "+m.Username,
		mailboxPage{Box: m, Form: formOf(m), Polled: &res, PlainAllowed: h.plainAllowed()})
	return nil
}

func (h *Handler) deleteMailbox(w http.ResponseWriter, r *req) error {
	if err := h.canChange(); err != nil {
		return err
	}
	if err := h.app.DeleteMailbox(r.Context(), r.actor, strings.ToLower(r.params.ByName("id"))); err != nil {
		return err
	}
	http.Redirect(w, r.Request, "/settings/mailboxes?done=deleted", http.StatusSeeOther)
	return nil
}
