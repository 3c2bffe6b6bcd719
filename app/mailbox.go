package app

import (
	"context"
	"errors"
	"strings"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
)

// Mailboxes (IMAP intake): an organization's mailboxes that dmarcd polls
// for reports. The rules are here (defaults, required fields, the
// plaintext policy, the connection and login tried before saving); the
// IMAP machinery is package ingest/imap's Intake. Credentials are never
// part of an answer: store.Mailbox has no field for them.

// DefaultArchiveFolder is where reports are moved when a new mailbox does
// not say (API.md's example); "" leaves them in place.
const DefaultArchiveFolder = "Archive/dmarcd"

// errNoMailboxes is the Internal error of an App built without IMAP
// intake.
var errNoMailboxes = errors.New("app: no IMAP mailbox service configured")

// MailboxSpec is a mailbox as a client sends it: on create, absent fields
// take their defaults; on update, absent (nil) fields keep their values.
// Password or OAuth2, when sent, replace the stored credentials.
type MailboxSpec struct {
	Host          *string              `json:"host"`
	Port          *int                 `json:"port"`
	Security      *string              `json:"security"`
	Username      *string              `json:"username"`
	Auth          *string              `json:"auth"`
	Folder        *string              `json:"folder"`
	ArchiveFolder *string              `json:"archive_folder"`
	IsActive      *bool                `json:"is_active"`
	Password      *string              `json:"password"`
	OAuth2        *imapin.OAuth2Config `json:"oauth2"`
}

// InvalidField is the Invalid error of one field sent wrong, for a front
// end that finds it before calling an operation.
func InvalidField(field, msg string) *Error {
	return invalid(nil, FieldError{Field: field, Message: msg})
}

// MailboxesEnabled reports whether this server has IMAP intake, so that
// mailboxes can be added, changed, polled and deleted.
func (a *App) MailboxesEnabled() bool { return a.cfg.Mailboxes != nil }

// AllowPlaintext reports whether mailboxes may use security "plain" on
// this server.
func (a *App) AllowPlaintext() bool {
	return a.cfg.Mailboxes != nil && a.cfg.Mailboxes.AllowPlaintext()
}

// ListMailboxes returns one page of the organization's mailboxes, newest
// first, and the total.
func (a *App) ListMailboxes(_ context.Context, actor Actor, p store.Page) ([]*store.Mailbox, int, error) {
	if err := Authorize(actor, Read); err != nil {
		return nil, 0, err
	}
	return a.db.ListMailboxes(actor.orgID(), p)
}

// FindMailbox returns mailbox id.
func (a *App) FindMailbox(_ context.Context, actor Actor, id string) (*store.Mailbox, error) {
	if err := Authorize(actor, Read); err != nil {
		return nil, err
	}
	m, err := a.db.FindMailbox(actor.orgID(), id)
	return m, notFound(err, "mailbox")
}

// mailboxes is the IMAP intake, or the Internal error of its absence.
func (a *App) mailboxes() (*imapin.Intake, error) {
	if a.cfg.Mailboxes == nil {
		return nil, errNoMailboxes
	}
	return a.cfg.Mailboxes, nil
}

// CreateMailbox checks sp, tries to connect and sign in, and stores the
// mailbox with its credentials sealed. Errors: Invalid naming the field,
// Unreachable with the server's words, NoSecretKey.
func (a *App) CreateMailbox(ctx context.Context, actor Actor, sp MailboxSpec) (*store.Mailbox, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, err
	}
	in, err := a.mailboxes()
	if err != nil {
		return nil, err
	}
	m := &store.Mailbox{OrgID: actor.orgID(), Security: imapin.SecurityTLS, Auth: store.AuthPassword, Folder: "INBOX",
		ArchiveFolder: DefaultArchiveFolder}
	if sp.Auth == nil && sp.OAuth2 != nil {
		m.Auth = store.AuthOAuth2
	}
	apply(m, sp)
	if sp.Port == nil {
		m.Port = defaultPort(m.Security)
	}
	if sp.Host == nil || strings.TrimSpace(*sp.Host) == "" {
		return nil, InvalidField("host", "is required")
	}
	if sp.Username == nil || *sp.Username == "" {
		return nil, InvalidField("username", "is required")
	}
	creds, err := credentialsOf(m.Auth, sp)
	if err != nil {
		return nil, err
	}
	if err := checkMailbox(in, m); err != nil {
		return nil, err
	}
	if err := try(ctx, in, m, creds); err != nil {
		return nil, err
	}
	sealed, err := in.Seal(creds)
	if err != nil {
		return nil, err
	}
	if err := a.db.CreateMailbox(m, sealed); err != nil {
		return nil, err
	}
	in.Changed()
	a.audit(actor, "mailbox.create", m.Username+"@"+m.Host)
	return m, nil
}

// UpdateMailbox applies sp to mailbox id. A change of host, port,
// security or username needs the credentials sent again
// (imapin.SecretRequired; Invalid otherwise, and nothing is dialled).
// When anything the connection depends on changes (or new credentials are
// sent, or the archive folder changes), the connection, login and archive
// folder are tried first. Errors as CreateMailbox's, and NotFound.
func (a *App) UpdateMailbox(ctx context.Context, actor Actor, id string, sp MailboxSpec) (*store.Mailbox, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, err
	}
	in, err := a.mailboxes()
	if err != nil {
		return nil, err
	}
	old, sealed, err := a.db.FindMailboxSecrets(actor.orgID(), id)
	if err != nil {
		return nil, notFound(err, "mailbox")
	}
	m := *old
	apply(&m, sp)
	if sp.Port == nil && sp.Security != nil && old.Port == defaultPort(old.Security) {
		m.Port = defaultPort(m.Security)
	}
	if err := checkMailbox(in, &m); err != nil {
		return nil, err
	}
	reconnect := connectionChanged(old, &m) || old.ArchiveFolder != m.ArchiveFolder || (m.IsActive && !old.IsActive)
	newCreds := sp.Password != nil || sp.OAuth2 != nil || m.Auth != old.Auth
	if !newCreds && imapin.SecretRequired(old, &m) {
		return nil, InvalidField(imapin.SecretAgain(m.Auth))
	}
	var creds imapin.Credentials
	if newCreds {
		if creds, err = credentialsOf(m.Auth, sp); err != nil {
			return nil, err
		}
	} else if creds, err = in.Open(sealed); err != nil && reconnect {
		return nil, InvalidField("password", err.Error()+"; send the credentials again")
	}
	if newCreds || reconnect {
		if err := try(ctx, in, &m, creds); err != nil {
			return nil, err
		}
	}
	u := store.MailboxUpdate{Host: &m.Host, Port: &m.Port, Security: &m.Security, Username: &m.Username,
		Auth: &m.Auth, Folder: &m.Folder, ArchiveFolder: &m.ArchiveFolder, IsActive: &m.IsActive}
	if newCreds {
		if u.Secrets, err = in.Seal(creds); err != nil {
			return nil, err
		}
	}
	out, err := a.db.UpdateMailbox(actor.orgID(), id, u)
	if err != nil {
		return nil, notFound(err, "mailbox")
	}
	in.Changed()
	return out, nil
}

// DeleteMailbox deletes mailbox id; its poller stops. Its mail stays
// where it is.
func (a *App) DeleteMailbox(_ context.Context, actor Actor, id string) error {
	if err := Authorize(actor, Write); err != nil {
		return err
	}
	in, err := a.mailboxes()
	if err != nil {
		return err
	}
	m, err := a.db.FindMailbox(actor.orgID(), id)
	if err != nil {
		return notFound(err, "mailbox")
	}
	if err := a.db.DeleteMailbox(actor.orgID(), id); err != nil {
		return notFound(err, "mailbox")
	}
	in.Changed()
	a.audit(actor, "mailbox.delete", m.Username+"@"+m.Host)
	return nil
}

// PollMailbox polls mailbox id now and records the outcome in its status.
// A poll that fails is no error: the result lists it; the error is for a
// mailbox not found.
func (a *App) PollMailbox(ctx context.Context, actor Actor, id string) (imapin.PollResult, error) {
	if err := Authorize(actor, Write); err != nil {
		return imapin.PollResult{}, err
	}
	in, err := a.mailboxes()
	if err != nil {
		return imapin.PollResult{}, err
	}
	m, sealed, err := a.db.FindMailboxSecrets(actor.orgID(), id)
	if err != nil {
		return imapin.PollResult{}, notFound(err, "mailbox")
	}
	return in.Poll(ctx, m, sealed)
}

// apply sets the fields of m that sp gives, as the store's update does,
// with the host name cleaned.
func apply(m *store.Mailbox, sp MailboxSpec) {
	store.MailboxUpdate{Host: sp.Host, Port: sp.Port, Security: sp.Security, Username: sp.Username,
		Auth: sp.Auth, Folder: sp.Folder, ArchiveFolder: sp.ArchiveFolder, IsActive: sp.IsActive}.Apply(m)
	m.Host = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(m.Host), "."))
}

func defaultPort(security string) int {
	if security == imapin.SecurityTLS {
		return 993
	}
	return 143
}

func connectionChanged(a, b *store.Mailbox) bool {
	return a.Host != b.Host || a.Port != b.Port || a.Security != b.Security || a.Username != b.Username || a.Folder != b.Folder
}

// credentialsOf takes the credentials of auth from sp.
func credentialsOf(auth string, sp MailboxSpec) (imapin.Credentials, error) {
	switch auth {
	case store.AuthPassword:
		if sp.Password == nil || *sp.Password == "" {
			return imapin.Credentials{}, InvalidField("password", "is required with auth password")
		}
		if sp.OAuth2 != nil {
			return imapin.Credentials{}, InvalidField("oauth2", "is only for auth oauth2")
		}
		if len(*sp.Password) > 4096 {
			return imapin.Credentials{}, InvalidField("password", "is longer than 4096 bytes")
		}
		return imapin.Credentials{Password: *sp.Password}, nil
	case store.AuthOAuth2:
		if sp.OAuth2 == nil {
			return imapin.Credentials{}, InvalidField("oauth2", "is required with auth oauth2 (token_url, client_id, and client_secret or refresh_token)")
		}
		if sp.Password != nil {
			return imapin.Credentials{}, InvalidField("password", "is only for auth password")
		}
		if err := sp.OAuth2.Check(); err != nil {
			return imapin.Credentials{}, InvalidField("oauth2", strings.TrimPrefix(err.Error(), "oauth2."))
		}
		c := *sp.OAuth2
		return imapin.Credentials{OAuth2: &c}, nil
	}
	return imapin.Credentials{}, InvalidField("auth", "must be password or oauth2")
}

// checkMailbox applies the server's policy and the store's rules before
// any connection is tried.
func checkMailbox(in *imapin.Intake, m *store.Mailbox) error {
	if m.Security == imapin.SecurityPlain && !in.AllowPlaintext() {
		return InvalidField("security", "plain is not allowed on this server (it runs without --imap-allow-plaintext); use tls or starttls")
	}
	// The store's own checks, on a copy, so that their message names the
	// field before anything is dialled.
	probe := *m
	if err := store.CheckMailbox(&probe); err != nil {
		if se, ok := errors.AsType[*store.Error](err); ok {
			field, msg, _ := strings.Cut(se.Msg, " ")
			return InvalidField(field, msg)
		}
		return err
	}
	return nil
}

// try connects and signs in as m would be polled, and makes sure its
// archive folder exists: Invalid naming the host when the address policy
// refuses it, Invalid naming archive_folder (in the server's words) when
// the server refuses that folder, Unreachable when the server refuses the
// rest.
func try(ctx context.Context, in *imapin.Intake, m *store.Mailbox, creds imapin.Credentials) error {
	err := in.Try(ctx, m, creds)
	if err == nil {
		return nil
	}
	if msg, ok := imapin.ArchiveFolderRefused(err); ok {
		return InvalidField("archive_folder", msg)
	}
	if why, ok := egress.RefusedReason(err); ok {
		return InvalidField("host", "refused by the address policy: "+why+" (the server allows it with --imap-allow-private)")
	}
	return &Error{Kind: Unreachable, Msg: err.Error(), Err: err}
}
