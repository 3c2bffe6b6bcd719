// Package imap fetches DMARC reports from IMAP mailboxes (API.md
// "Mailboxes (IMAP intake)") and hands each message to the ingest
// pipeline through the Sink interface.
//
// Safety rules, and why a crash loses nothing and stores nothing twice:
//
//   - Messages are read with BODY.PEEK, never selected by \Seen, so no flag
//     changes and a mail client reading the box changes nothing here.
//   - Only messages past the remembered UID (under the folder's
//     UIDVALIDITY; a new UIDVALIDITY starts again from the first message)
//     are read.
//   - For each message, in UID order: Sink.Ingest, which returns only once
//     the reports are durably stored or quarantined; then, if it held a
//     report, the move to the archive folder; then the UID mark is advanced
//     and persisted. A crash before the move leaves the message in the
//     folder and the mark behind it: it is read and ingested again, and the
//     pipeline recognizes every report in it as a duplicate (aggregate
//     reports by their identity, failure reports by their dedup key), so
//     nothing is stored twice, and the move is retried. A crash after the
//     move and before the mark leaves the mark behind a message that is no
//     longer in the folder: the next search does not find it. A message
//     without a report is never moved and its flags never touched; the mark
//     passes it, so it is read once.
//   - A Sink error (the store could not keep the reports) or a move that
//     failed with the connection (or a server busy for the moment) ends
//     the poll there: the mark stays before that message, so it is retried
//     on the next poll. A move the server refuses (NO: a folder name it
//     will not take, no permission) leaves that message in the folder, its
//     reports stored, and the poll goes on: one message never holds up the
//     others; the poll ends with an error naming the refusal.
//   - messages_imported counts a message that held a report when its mark
//     is saved (State.Save), in the same write: once, whatever becomes of
//     the poll.
//   - Folder names use "/" between levels, as the default archive folder
//     "Archive/dmarcd" does; on a server whose hierarchy delimiter is
//     another (Dovecot's Maildir++ layout: ".") it is replaced by that
//     delimiter (ServerFolderName). The archive folder is created, or
//     found, when a mailbox is added or changed (Check), so that a name the
//     server refuses is said then.
package imap

import (
	"context"
	"crypto/x509"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/internal/egress"
)

// Security values of an Account.
const (
	SecurityTLS      = "tls"
	SecurityStartTLS = "starttls"
	SecurityPlain    = "plain"
)

// Account is what connecting to and reading one mailbox needs, credentials
// in clear; it is never logged.
type Account struct {
	Host          string
	Port          int
	Security      string // SecurityTLS, SecurityStartTLS or SecurityPlain
	Username      string
	Credentials   Credentials
	Folder        string
	ArchiveFolder string // "" leaves reports in place
}

// Credentials sign in to a mailbox: a password, or OAuth2.
type Credentials struct {
	Password string        `json:"password,omitempty"`
	OAuth2   *OAuth2Config `json:"oauth2,omitempty"`
}

// Outcome is what the pipeline did with one message. Quarantined counts a
// message that looked like a report but held none that could be read and
// was kept in quarantine: it is done, and moved like a report. Expired
// counts reports older than the retention window, left out as an import
// leaves them out: the message held reports, and is done too.
type Outcome struct {
	Aggregate   int
	Failure     int
	TLS         int
	Quarantined int
	Expired     int
	NotReport   int
}

// done reports whether the message was kept by the pipeline and may leave
// the folder.
func (o Outcome) done() bool { return o.Aggregate+o.Failure+o.TLS+o.Quarantined+o.Expired > 0 }

// Sink is the ingest pipeline as the IMAP reader sees it. Ingest routes raw
// (one RFC 5322 message) within organization orgID and returns only after
// every report in it is durably stored or the message quarantined; an
// error means neither happened, and the message will be offered again.
// Ingesting the same message again must store nothing twice.
type Sink interface {
	Ingest(ctx context.Context, orgID string, raw []byte) (Outcome, error)
}

// State is where reading each mailbox has got to; *store.DB implements it
// through StoreState.
type State interface {
	// Load returns the UIDVALIDITY and the last UID done of mailbox id.
	Load(id string) (uidValidity, lastUID uint32, err error)
	// Save durably records them, and adds imported (1 when the mail up to
	// which lastUID goes held a report) to the mailbox's
	// messages_imported in the same write: a mail is counted once, when
	// it is done.
	Save(id string, uidValidity, lastUID uint32, imported int) error
}

// PollResult is what one poll did, in the shape of the answer of POST
// /mailboxes/{id}/poll.
type PollResult struct {
	Messages    int      `json:"messages"`
	Aggregate   int      `json:"aggregate_reports"`
	Failure     int      `json:"failure_reports"`
	TLS         int      `json:"tls_reports"`
	Quarantined int      `json:"quarantined"`
	NotReports  int      `json:"not_reports"`
	Imported    int      `json:"-"` // messages that held a report, done (counted in messages_imported by State.Save)
	Errors      []string `json:"errors"`
}

// Options are the settings shared by every mailbox.
type Options struct {
	// Resolver resolves mailbox and token URL hosts (the server's
	// --dns-server); nil means the system resolver.
	Resolver egress.Resolver
	// AllowPrivate lets mailboxes reach non-public addresses
	// (--imap-allow-private), checked on the address actually dialled.
	AllowPrivate bool
	// AllowPlaintext permits security "plain" (--imap-allow-plaintext).
	AllowPlaintext bool
	// RootCAs are trusted besides nothing else; nil means the system pool
	// (egress.LoadCAFile adds --imap-ca-file to it).
	RootCAs *x509.CertPool
	// Timeout bounds each step: connecting, TLS, greeting, login, every
	// command (0: 30s). Fetching a large message gets longer in proportion.
	Timeout time.Duration
	// MaxMessageBytes is the largest message fetched (0: 50 MiB); larger
	// ones are left in place with an error.
	MaxMessageBytes int64
	// Logger receives connection events, never credentials.
	Logger *slog.Logger
}

const (
	defaultTimeout  = 30 * time.Second
	defaultMaxBytes = 50 << 20
)

func (o *Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return defaultTimeout
}

func (o *Options) maxBytes() int64 {
	if o.MaxMessageBytes > 0 {
		return o.MaxMessageBytes
	}
	return defaultMaxBytes
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// policy is the outbound address policy of every mailbox and token URL.
func (o *Options) policy() egress.Policy {
	return egress.Policy{AllowPrivate: o.AllowPrivate, RootCAs: o.RootCAs}
}

func (o *Options) resolver() egress.Resolver {
	if o.Resolver != nil {
		return o.Resolver
	}
	return egress.SystemResolver{}
}
