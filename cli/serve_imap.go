package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
)

// imapOptions are the flags of the IMAP intake (--imap-*).
type imapOptions struct {
	Interval       time.Duration
	AllowPrivate   bool
	AllowPlaintext bool
	CAFile         string
}

func (o *imapOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	durationVar(f, &o.Interval, "imap-interval", 5*time.Minute, "how often each mailbox is polled (mailboxes with IMAP IDLE also get new mail within seconds)")
	f.BoolVar(&o.AllowPrivate, "imap-allow-private", false, "let mailboxes (and their OAuth2 token URLs) reach loopback, private and link-local addresses")
	f.BoolVar(&o.AllowPlaintext, "imap-allow-plaintext", false, `allow mailboxes with security "plain" (password sent unencrypted)`)
	f.StringVar(&o.CAFile, "imap-ca-file", "", "PEM file of certificate authorities trusted for IMAP servers and OAuth2 token URLs, besides the system's")
}

// testSinkDelayEnv makes the IMAP intake wait this long (a Go duration)
// after each message's reports are stored and before it is moved. It is
// for the end-to-end tests only, which kill the server in that window to
// prove that nothing is lost or stored twice; it is not a setting.
const testSinkDelayEnv = "DMARCD_TEST_IMAP_DELAY_AFTER_STORE"

// imapIntake is the IMAP intake of serve: the machinery the mailbox
// operations use, and the Manager that polls.
type imapIntake struct {
	in      *imapin.Intake
	manager *imapin.Manager
}

// newIMAPIntake loads (or creates) the secret key beside the database and
// builds the intake; its Sink is set by attach once the pipeline exists.
func newIMAPIntake(o imapOptions, dataDir string, db *store.DB, resolver egress.Resolver, log *slog.Logger, reg *metrics.Registry) (*imapIntake, error) {
	if o.Interval <= 0 {
		return nil, usagef("--imap-interval must be positive")
	}
	opts := &imapin.Options{Resolver: resolver, AllowPrivate: o.AllowPrivate, AllowPlaintext: o.AllowPlaintext, Logger: log}
	if o.CAFile != "" {
		pool, err := egress.LoadCAFile(o.CAFile)
		if err != nil {
			return nil, usagef("--imap-ca-file: %v", err)
		}
		opts.RootCAs = pool
	}
	if o.AllowPrivate {
		log.Warn("--imap-allow-private: mailboxes may connect to loopback, private and link-local addresses")
	}
	if o.AllowPlaintext {
		log.Warn("--imap-allow-plaintext: mailboxes may send their passwords unencrypted")
	}
	box, err := secret.LoadOrCreate(secret.KeyPath(dataDir))
	if err != nil {
		return nil, fmt.Errorf("mailbox credentials key: %w", err)
	}
	met := imapin.NewMetrics(reg)
	return &imapIntake{in: &imapin.Intake{DB: db, Box: box, Options: opts, Metrics: met}}, nil
}

// attach gives the intake its Sink and Manager.
func (in *imapIntake) attach(sink imapin.Sink, interval time.Duration) {
	if d, err := time.ParseDuration(os.Getenv(testSinkDelayEnv)); err == nil && d > 0 {
		sink = delayedSink{Sink: sink, delay: d}
	}
	dir := imapin.StoreDirectory{DB: in.in.DB, Box: in.in.Box, Metrics: in.in.Metrics}
	in.in.Sink = sink
	in.manager = imapin.NewManager(dir, sink, dir, in.in.Options)
	in.manager.Interval = interval
	in.in.Manager = in.manager
}

// delayedSink waits after each message is stored (see testSinkDelayEnv).
type delayedSink struct {
	imapin.Sink
	delay time.Duration
}

func (s delayedSink) Ingest(ctx context.Context, orgID string, raw []byte) (imapin.Outcome, error) {
	out, err := s.Sink.Ingest(ctx, orgID, raw)
	if err == nil {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
		}
	}
	return out, err
}
