// Package app is dmarcd's application layer: the operations a person or
// a program runs (domains, webhooks, API keys, mailboxes, exports,
// quarantine actions, organization settings), each checked once for who
// may run it and what the plan allows (authorize.go). The front ends
// (httpapi, web, admin) decode a request, call an operation, and encode
// its answer; they import none of each other. Errors are *Error values of
// a Kind, which each front end maps once.
//
// Reads of report data (aggregate and TLS reports, statistics, alerts,
// sender views) need only a signed-in actor of the organization and go
// straight to the store; what a plan gates (failure reports, webhooks) is
// read through here.
package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/ingest"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// DNSChecker is what the operations need of DNS: the domain verification
// and check-dmarc logic of package dnscheck (*dnscheck.Checker).
type DNSChecker interface {
	CheckDMARC(ctx context.Context, domain string) (*dnscheck.CheckResult, error)
	Verify(ctx context.Context, domain, reportingEmail string) error
	SuggestRecord(ctx context.Context, domain, reportingEmail string) (dnscheck.Suggestion, error)
}

// TLSChecker is the check-tls logic of package dnscheck
// (*dnscheck.TLSChecker).
type TLSChecker interface {
	CheckTLS(ctx context.Context, domain string) (*dnscheck.TLSResult, error)
}

// QuarantineRetrier ingests a quarantine entry's bytes again
// (*ingest.Pipeline).
type QuarantineRetrier interface {
	RetryQuarantine(ctx context.Context, id string) (*ingest.Result, error)
}

// PublishedCache keeps the published DMARC records it looked up
// (*senders.Views, for the policy advice of domains without a DNS check).
type PublishedCache interface {
	ForgetPublished(name string)
}

// Config holds what an App is built from. Only Store is required; an
// operation whose part is missing fails with an Internal error.
type Config struct {
	Store *store.DB
	// DNS verifies domains, suggests their record and answers check-dmarc.
	DNS DNSChecker
	// Published forgets a domain's looked-up record when a verification
	// reads its DNS; nil: nothing to forget.
	Published PublishedCache
	// TLS answers check-tls.
	TLS TLSChecker
	// ReportingDomain is the domain of every reporting address.
	ReportingDomain string
	// PublicURL is the URL reporters reach the server by (--public-url,
	// no trailing slash); when it is https, a new domain's TLS-RPT record
	// adds the <PublicURL>/tlsrpt/<local part> URI.
	PublicURL string
	// DNSTimeout is the budget of the DNS work of one operation; 0 means
	// 10s.
	DNSTimeout time.Duration
	// AuthFailLimit is how many failed authentications a client address
	// may make per minute (the API and the sign-in form together), and a
	// revoked key on its own; 0 means 30.
	AuthFailLimit int

	// WebhookClient sends test deliveries; WebhookResolver and
	// WebhookPolicy validate webhook URLs (the policy the client was built
	// with).
	WebhookClient   *webhook.Client
	WebhookResolver egress.Resolver
	WebhookPolicy   egress.Policy

	// Mailboxes is the IMAP intake the mailbox operations try, seal and
	// poll with.
	Mailboxes *imapin.Intake
	// Quarantine retries quarantine entries.
	Quarantine QuarantineRetrier

	// Mail is the relay test mail is sent through (--mail-relay); nil
	// without one.
	Mail *mailout.Relay

	// Digests builds the digests of Digest and SendDigest; nil builds
	// them over Store with the embedded known senders and no DNS.
	Digests *digest.Builder

	// Now is the clock; nil means the wall clock.
	Now func() time.Time
	// Logger receives what an operator should know of (a revoked key
	// still in use); nil discards.
	Logger *slog.Logger
}

// App runs the operations. Create it with New; it is safe for concurrent
// use.
type App struct {
	cfg      Config
	db       *store.DB
	clock    func() time.Time
	log      *slog.Logger
	authFail *failLimiter
	// revokedFail counts failed authentications with revoked keys, by key
	// id, apart from authFail (see authFailure).
	revokedFail *failLimiter
	lastUsed    lastUsed
}

// New returns the App of cfg.
func New(cfg Config) *App {
	if cfg.DNSTimeout <= 0 {
		cfg.DNSTimeout = 10 * time.Second
	}
	if cfg.AuthFailLimit <= 0 {
		cfg.AuthFailLimit = 30
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &App{cfg: cfg, db: cfg.Store, clock: cfg.Now, log: cfg.Logger,
		authFail: newFailLimiter(cfg.AuthFailLimit), revokedFail: newFailLimiter(cfg.AuthFailLimit)}
	a.lastUsed.m = map[string]time.Time{}
	return a
}

// now is the time an operation stamps: UTC, whole seconds.
func (a *App) now() time.Time { return a.clock().UTC().Truncate(time.Second) }

// ReportingDomain is the domain of every reporting address.
func (a *App) ReportingDomain() string { return a.cfg.ReportingDomain }

// dnsContext bounds the DNS work of one operation.
func (a *App) dnsContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.cfg.DNSTimeout)
}
