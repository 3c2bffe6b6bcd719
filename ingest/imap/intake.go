package imap

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

// Intake is the IMAP machinery the mailbox operations (package app) work
// with: the key that seals credentials, the connection policy, the way
// polled mail is ingested, and the Manager that polls. The rules of a
// mailbox (defaults, required fields, what is tried before saving) are
// the application layer's.
type Intake struct {
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

// ErrNoKey means the server has no secret key loaded, so credentials can
// be neither stored nor read.
var ErrNoKey = errors.New("imap: no secret key loaded (" + secret.FileName + ")")

func (in *Intake) now() time.Time {
	if in.Now != nil {
		return in.Now()
	}
	return time.Now()
}

func (in *Intake) opts() *Options {
	if in.Options == nil {
		return &Options{}
	}
	return in.Options
}

// AllowPlaintext reports whether mailboxes may use security "plain"
// (--imap-allow-plaintext).
func (in *Intake) AllowPlaintext() bool { return in.opts().AllowPlaintext }

// Try connects and signs in as m would be polled, with creds, and
// returns the connection's error.
func (in *Intake) Try(ctx context.Context, m *store.Mailbox, creds Credentials) error {
	acct := Account{Host: m.Host, Port: m.Port, Security: m.Security, Username: m.Username,
		Credentials: creds, Folder: m.Folder, ArchiveFolder: m.ArchiveFolder}
	return Check(ctx, acct, in.opts())
}

// Seal seals c with the server's key (ErrNoKey without one).
func (in *Intake) Seal(c Credentials) ([]byte, error) {
	if in.Box == nil {
		return nil, ErrNoKey
	}
	sealed, err := SealCredentials(in.Box, c)
	if err != nil {
		return nil, fmt.Errorf("imap: sealing credentials: %w", err)
	}
	return sealed, nil
}

// Open opens credentials Seal sealed.
func (in *Intake) Open(sealed []byte) (Credentials, error) { return OpenCredentials(in.Box, sealed) }

// Poll polls mailbox m (its credentials sealed) now and records the
// outcome in its status: through the Manager when it polls m, else on a
// connection of its own. A poll that fails is no error here: the result
// lists it.
func (in *Intake) Poll(ctx context.Context, m *store.Mailbox, sealed []byte) (PollResult, error) {
	if in.Sink == nil {
		return PollResult{}, errors.New("imap: polling needs the running server's ingest pipeline")
	}
	if in.Manager != nil && m.IsActive {
		_ = in.Manager.Refresh(ctx)
		res, err := in.Manager.PollNow(ctx, m.ID)
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
	dir := StoreDirectory{DB: in.DB, Box: in.Box, Metrics: in.Metrics}
	acct, err := AccountOf(m, in.Box, sealed)
	var res PollResult
	if err == nil {
		res, err = PollOnce(ctx, Entry{Mailbox: Mailbox{ID: m.ID, OrgID: m.OrgID}, Account: acct}, in.Sink, dir, in.opts())
	} else {
		res = PollResult{Errors: []string{err.Error()}}
	}
	if rerr := dir.RecordPoll(m.ID, in.now(), res, err); rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
		return res, rerr
	}
	return res, nil
}

// Changed makes the Manager pick up a change of the mailboxes at once
// rather than at its next reload.
func (in *Intake) Changed() {
	if in.Manager != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = in.Manager.Refresh(ctx)
	}
}
