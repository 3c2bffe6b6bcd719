package imap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

// DefaultArchiveFolder is where reports are moved when a new mailbox does
// not say (API.md's example); "" leaves them in place.
const DefaultArchiveFolder = "Archive/dmarcd"

// Service is mailbox management for the API and the admin socket: it
// checks a mailbox's fields, tries a connection and login before saving,
// seals the credentials, and polls on demand.
type Service struct {
	DB      *store.DB
	Box     *secret.Box // nil: credentials can be neither sealed nor opened
	Options *Options
	Sink    Sink
	// Manager, when set, is told about changes and runs on-demand polls of
	// the mailboxes it polls; without it a poll connects on its own.
	Manager *Manager
	Metrics *Metrics
	Now     func() time.Time // nil: time.Now
}

// Spec is a mailbox as a client sends it: on create, absent fields take
// their defaults; on update, absent (nil) fields keep their values.
// Password or OAuth2, when sent, replace the stored credentials.
type Spec struct {
	Host          *string       `json:"host"`
	Port          *int          `json:"port"`
	Security      *string       `json:"security"`
	Username      *string       `json:"username"`
	Auth          *string       `json:"auth"`
	Folder        *string       `json:"folder"`
	ArchiveFolder *string       `json:"archive_folder"`
	IsActive      *bool         `json:"is_active"`
	Password      *string       `json:"password"`
	OAuth2        *OAuth2Config `json:"oauth2"`
}

// InputError is a field a client sent wrong (API: 422 validation_failed).
// It wraps store.ErrInvalid.
type InputError struct{ Field, Msg string }

func (e *InputError) Error() string { return "invalid " + e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, store.ErrInvalid) hold.
func (e *InputError) Unwrap() error { return store.ErrInvalid }

// UnreachableError is a failed connection or login tried before saving
// (API: 422 mailbox_unreachable with the server's words).
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "mailbox unreachable: " + e.Err.Error() }

// Unwrap returns the connection's error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// ErrNoKey means the server has no secret key loaded, so credentials can
// be neither stored nor read.
var ErrNoKey = errors.New("imap: no secret key loaded (" + secret.FileName + ")")

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) opts() *Options {
	if s.Options == nil {
		return &Options{}
	}
	return s.Options
}

// Create checks sp, tries to connect and sign in, and stores the mailbox
// of organization orgID with its credentials sealed.
func (s *Service) Create(ctx context.Context, orgID string, sp Spec) (*store.Mailbox, error) {
	m := &store.Mailbox{OrgID: orgID, Security: SecurityTLS, Auth: store.AuthPassword, Folder: "INBOX",
		ArchiveFolder: DefaultArchiveFolder}
	if sp.Auth == nil && sp.OAuth2 != nil {
		m.Auth = store.AuthOAuth2
	}
	apply(m, sp)
	if sp.Port == nil {
		m.Port = defaultPort(m.Security)
	}
	if sp.Host == nil || strings.TrimSpace(*sp.Host) == "" {
		return nil, &InputError{"host", "is required"}
	}
	if sp.Username == nil || *sp.Username == "" {
		return nil, &InputError{"username", "is required"}
	}
	creds, err := credentialsOf(m.Auth, sp)
	if err != nil {
		return nil, err
	}
	if err := s.checkFields(m); err != nil {
		return nil, err
	}
	if err := s.try(ctx, m, creds); err != nil {
		return nil, err
	}
	sealed, err := s.seal(creds)
	if err != nil {
		return nil, err
	}
	if err := s.DB.CreateMailbox(m, sealed); err != nil {
		return nil, err
	}
	s.changed()
	return m, nil
}

// Update applies sp to mailbox id of organization orgID. When anything
// the connection depends on changes (or new credentials are sent), the
// connection and login are tried first. ErrNotFound for another
// organization's mailbox.
func (s *Service) Update(ctx context.Context, orgID, id string, sp Spec) (*store.Mailbox, error) {
	old, sealed, err := s.DB.FindMailboxSecrets(orgID, id)
	if err != nil {
		return nil, err
	}
	m := *old
	apply(&m, sp)
	if sp.Port == nil && sp.Security != nil && old.Port == defaultPort(old.Security) {
		m.Port = defaultPort(m.Security)
	}
	if err := s.checkFields(&m); err != nil {
		return nil, err
	}
	newCreds := sp.Password != nil || sp.OAuth2 != nil || m.Auth != old.Auth
	var creds Credentials
	if newCreds {
		if creds, err = credentialsOf(m.Auth, sp); err != nil {
			return nil, err
		}
	} else if creds, err = OpenCredentials(s.Box, sealed); err != nil {
		if connectionChanged(old, &m) || (m.IsActive && !old.IsActive) {
			return nil, &InputError{"password", err.Error() + "; send the credentials again"}
		}
	}
	if newCreds || connectionChanged(old, &m) || (m.IsActive && !old.IsActive) {
		if err := s.try(ctx, &m, creds); err != nil {
			return nil, err
		}
	}
	u := store.MailboxUpdate{Host: &m.Host, Port: &m.Port, Security: &m.Security, Username: &m.Username,
		Auth: &m.Auth, Folder: &m.Folder, ArchiveFolder: &m.ArchiveFolder, IsActive: &m.IsActive}
	if newCreds {
		if u.Secrets, err = s.seal(creds); err != nil {
			return nil, err
		}
	}
	out, err := s.DB.UpdateMailbox(orgID, id, u)
	if err != nil {
		return nil, err
	}
	s.changed()
	return out, nil
}

// Delete removes mailbox id of organization orgID; its poller stops.
func (s *Service) Delete(orgID, id string) error {
	if err := s.DB.DeleteMailbox(orgID, id); err != nil {
		return err
	}
	s.changed()
	return nil
}

// Poll polls mailbox id of organization orgID now and records the outcome
// in its status. A poll that fails is no error here: the result lists it
// (API: 200 with errors); the error is for a mailbox that is not found.
func (s *Service) Poll(ctx context.Context, orgID, id string) (PollResult, error) {
	m, sealed, err := s.DB.FindMailboxSecrets(orgID, id)
	if err != nil {
		return PollResult{}, err
	}
	if s.Sink == nil {
		return PollResult{}, errors.New("imap: polling needs the running server's ingest pipeline")
	}
	if s.Manager != nil && m.IsActive {
		_ = s.Manager.Refresh(ctx)
		res, err := s.Manager.PollNow(ctx, id)
		if !errors.Is(err, ErrNotPolled) {
			if res.Errors == nil {
				res.Errors = []string{}
			}
			if err != nil && len(res.Errors) == 0 {
				res.Errors = append(res.Errors, err.Error())
			}
			return res, ctx.Err()
		}
	}
	dir := StoreDirectory{DB: s.DB, Box: s.Box, Metrics: s.Metrics}
	acct, err := AccountOf(m, s.Box, sealed)
	var res PollResult
	if err == nil {
		res, err = PollOnce(ctx, Entry{Mailbox: Mailbox{ID: m.ID, OrgID: m.OrgID}, Account: acct}, s.Sink, dir, s.opts())
	} else {
		res = PollResult{Errors: []string{err.Error()}}
	}
	if rerr := dir.RecordPoll(m.ID, s.now(), res, err); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
		return res, rerr
	}
	return res, nil
}

// changed makes the Manager pick up a change at once rather than at its
// next reload.
func (s *Service) changed() {
	if s.Manager != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Manager.Refresh(ctx)
	}
}

// apply sets the fields of m that sp gives, as the store's update does,
// with the host name cleaned.
func apply(m *store.Mailbox, sp Spec) {
	store.MailboxUpdate{Host: sp.Host, Port: sp.Port, Security: sp.Security, Username: sp.Username,
		Auth: sp.Auth, Folder: sp.Folder, ArchiveFolder: sp.ArchiveFolder, IsActive: sp.IsActive}.Apply(m)
	m.Host = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(m.Host), "."))
}

func defaultPort(security string) int {
	if security == SecurityTLS {
		return 993
	}
	return 143
}

func connectionChanged(a, b *store.Mailbox) bool {
	return a.Host != b.Host || a.Port != b.Port || a.Security != b.Security || a.Username != b.Username || a.Folder != b.Folder
}

// credentialsOf takes the credentials of auth from sp.
func credentialsOf(auth string, sp Spec) (Credentials, error) {
	switch auth {
	case store.AuthPassword:
		if sp.Password == nil || *sp.Password == "" {
			return Credentials{}, &InputError{"password", "is required with auth password"}
		}
		if sp.OAuth2 != nil {
			return Credentials{}, &InputError{"oauth2", "is only for auth oauth2"}
		}
		if len(*sp.Password) > 4096 {
			return Credentials{}, &InputError{"password", "is longer than 4096 bytes"}
		}
		return Credentials{Password: *sp.Password}, nil
	case store.AuthOAuth2:
		if sp.OAuth2 == nil {
			return Credentials{}, &InputError{"oauth2", "is required with auth oauth2 (token_url, client_id, and client_secret or refresh_token)"}
		}
		if sp.Password != nil {
			return Credentials{}, &InputError{"password", "is only for auth password"}
		}
		if err := sp.OAuth2.Check(); err != nil {
			return Credentials{}, &InputError{"oauth2", strings.TrimPrefix(err.Error(), "oauth2.")}
		}
		c := *sp.OAuth2
		return Credentials{OAuth2: &c}, nil
	}
	return Credentials{}, &InputError{"auth", "must be password or oauth2"}
}

// checkFields applies the server's policy and the store's rules before any
// connection is tried.
func (s *Service) checkFields(m *store.Mailbox) error {
	if m.Security == SecurityPlain && !s.opts().AllowPlaintext {
		return &InputError{"security", "plain is not allowed on this server (it runs without --imap-allow-plaintext); use tls or starttls"}
	}
	// The store's own checks, on a copy, so that their message names the
	// field before anything is dialled.
	probe := *m
	if err := store.CheckMailbox(&probe); err != nil {
		var se *store.Error
		if errors.As(err, &se) {
			field, msg, _ := strings.Cut(se.Msg, " ")
			return &InputError{field, msg}
		}
		return err
	}
	return nil
}

// try connects and signs in as m would be polled.
func (s *Service) try(ctx context.Context, m *store.Mailbox, creds Credentials) error {
	acct := Account{Host: m.Host, Port: m.Port, Security: m.Security, Username: m.Username,
		Credentials: creds, Folder: m.Folder, ArchiveFolder: m.ArchiveFolder}
	err := Check(ctx, acct, s.opts())
	if err == nil {
		return nil
	}
	if why, ok := egress.RefusedReason(err); ok {
		return &InputError{"host", "refused by the address policy: " + why + " (the server allows it with --imap-allow-private)"}
	}
	return &UnreachableError{Err: err}
}

func (s *Service) seal(c Credentials) ([]byte, error) {
	if s.Box == nil {
		return nil, ErrNoKey
	}
	sealed, err := SealCredentials(s.Box, c)
	if err != nil {
		return nil, fmt.Errorf("imap: sealing credentials: %w", err)
	}
	return sealed, nil
}
