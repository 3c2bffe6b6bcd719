package cli

import (
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/worker"
)

// mailPasswordEnv holds the relay password when --mail-relay-password-file
// is not given. It is no flag: a password on the command line would show
// in ps.
const mailPasswordEnv = "DMARCD_MAIL_RELAY_PASSWORD"

// mailOptions are the flags of outbound mail (--mail-*).
type mailOptions struct {
	Relay        string
	TLS          string
	User         string
	PasswordFile string
	From         string
	AllowPrivate bool
	CAFile       string
	RetryDelays  []time.Duration
	AlertWindow  time.Duration
}

func (o *mailOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Relay, "mail-relay", "", `SMTP relay HOST:PORT that alert mail and digests go through, e.g. smtp.example.net:587 (default: none; mail waits in the outbox)`)
	f.StringVar(&o.TLS, "mail-relay-tls", mailout.TLSStartTLS, "how the relay connection is encrypted: starttls (port 587), tls (port 465) or none (only for a relay on loopback)")
	f.StringVar(&o.User, "mail-relay-user", "", "user name to sign in to the relay with (AUTH PLAIN); the password comes from --mail-relay-password-file or "+mailPasswordEnv)
	f.StringVar(&o.PasswordFile, "mail-relay-password-file", "", "file holding the relay password (one line; default: the environment variable "+mailPasswordEnv+")")
	f.StringVar(&o.From, "mail-from", "", "sender address of dmarcd's mail, e.g. dmarcd@example.net (its domain's SPF and DKIM must allow the relay)")
	f.BoolVar(&o.AllowPrivate, "mail-relay-allow-private", false, "let --mail-relay be on a loopback, private or link-local address (implied by --mail-relay-tls none)")
	f.StringVar(&o.CAFile, "mail-relay-ca-file", "", "PEM file of certificate authorities trusted for the relay, besides the system's")
	durationSliceVar(f, &o.RetryDelays, "mail-retry-delays", worker.DefaultMailRetryDelays(), "waits before each retry of a mail the relay did not take (4xx or no connection), comma-separated (one attempt more than delays; 5xx is not retried)")
	durationVar(f, &o.AlertWindow, "mail-alert-window", worker.DefaultAlertMailWindow, "alert mail grouping: one domain mails one recipient at most once in this window, listing what happened")
}

// relay builds the relay of the flags, or nil without --mail-relay. It
// refuses, naming the flag, a malformed relay or sender, --mail-relay-tls
// none for a relay not on loopback, a password without a user, a user
// without a password, and an unreadable password or CA file. The password
// is never logged.
func (o *mailOptions) relay(resolver *dnscheck.Resolver, publicURL string, log *slog.Logger) (*mailout.Relay, error) {
	for _, d := range o.RetryDelays {
		if d <= 0 {
			return nil, usagef("--mail-retry-delays must all be positive, got %s", d)
		}
	}
	if o.AlertWindow <= 0 {
		return nil, usagef("--mail-alert-window must be positive")
	}
	if o.Relay == "" {
		if o.From != "" || o.User != "" || o.PasswordFile != "" {
			return nil, usagef("--mail-from, --mail-relay-user and --mail-relay-password-file need --mail-relay HOST:PORT")
		}
		return nil, nil
	}
	if o.From == "" {
		return nil, usagef("--mail-relay needs --mail-from ADDRESS (the sender of dmarcd's mail)")
	}
	password := os.Getenv(mailPasswordEnv)
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, usagef("--mail-relay-password-file: %v", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if o.User != "" && password == "" {
		return nil, usagef("--mail-relay-user needs a password: --mail-relay-password-file FILE or %s", mailPasswordEnv)
	}
	if o.User == "" && o.PasswordFile != "" {
		return nil, usagef("--mail-relay-password-file needs --mail-relay-user")
	}
	if o.User == "" {
		password = "" // an inherited variable with no user to go with it
	}
	p := egress.Policy{AllowPrivate: o.AllowPrivate}
	if o.CAFile != "" {
		pool, err := egress.LoadCAFile(o.CAFile)
		if err != nil {
			return nil, usagef("--mail-relay-ca-file: %v", err)
		}
		p.RootCAs = pool
	}
	hello := "localhost"
	if u, err := url.Parse(publicURL); err == nil && u.Hostname() != "" {
		hello = u.Hostname()
	}
	r, err := mailout.NewRelay(mailout.RelayConfig{Addr: o.Relay, TLS: o.TLS, User: o.User, Password: password,
		From: o.From, HelloName: hello, Resolver: resolver, Policy: p})
	if err != nil {
		return nil, usageError{err}
	}
	if o.AllowPrivate {
		log.Warn("--mail-relay-allow-private: the mail relay may be on a loopback, private or link-local address")
	}
	log.Info("mail relay configured", "relay", r.String(), "from", o.From, "user", o.User)
	return r, nil
}

// messageHost is the host of Message-IDs: the --public-url host, "" for
// the relay's.
func messageHost(publicURL string) string {
	if u, err := url.Parse(publicURL); err == nil {
		return u.Hostname()
	}
	return ""
}

// mailJobs are the jobs of outbound mail, with a relay only: the sending
// job and alert mail. Without a relay no alert mail is queued (it could
// never leave); the first start with one mails the alerts raised from
// then on.
func (s *server) mailJobs() {
	o := s.o
	if s.relay == nil {
		return
	}
	s.sched.Add((&worker.AlertMail{Store: s.db, PublicURL: o.PublicURL, Window: o.Mail.AlertWindow, Log: s.log}).Job())
	s.sched.Add((&worker.MailSender{Store: s.db, Relay: s.relay, MessageHost: messageHost(o.PublicURL),
		RetryDelays: o.Mail.RetryDelays, Log: s.log, Metrics: s.reg}).Job())
	// Digests only with a relay: none is built for an outbox nobody sends.
	s.sched.Add((&worker.DigestMail{Store: s.db, Builder: &digest.Builder{DB: s.db, Views: s.views},
		PublicURL: o.PublicURL, Log: s.log}).Job())
}
