package cli

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/ingest"
	tlshttps "github.com/dmarcd/dmarcd/ingest/https"
	"github.com/dmarcd/dmarcd/ingest/smtp"
	"github.com/dmarcd/dmarcd/internal/clientaddr"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/worker"
)

// 'dmarcd serve' in three files: this one has the command, its flags and
// their checks; serve_build.go builds the components (newServer);
// serve_run.go starts and stops them (run).

// serveOptions are the flags of 'dmarcd serve'; each also reads
// DMARCD_<FLAG> when not given.
type serveOptions struct {
	Listen          string
	ReportingDomain string
	DNSServers      []string
	DNSTimeout      time.Duration
	RateLimit       int
	LogFormat       string
	LogLevel        string
	ShutdownTimeout time.Duration

	SMTPListen   string
	SMTPHostname string
	SMTPMaxBytes int64
	SMTPMaxConns int
	// SMTPMaxConnsPerIP and SMTPCommandTimeout keep idle connections of
	// one host from locking the listener (issue 13).
	SMTPMaxConnsPerIP  int
	SMTPCommandTimeout time.Duration
	// QuarantineMaxBytes caps the quarantine; QuarantineRetention is how
	// long its entries are kept (issue 13).
	QuarantineMaxBytes  int64
	QuarantineRetention time.Duration
	SMTPReadTimeout     time.Duration
	SMTPWriteTimeout    time.Duration
	SMTPTLSCert         string
	SMTPTLSKey          string
	Geo                 geoOptions
	Demo                bool

	// The scheduler's jobs (worker/) and the alert rules' thresholds.
	VerifyInterval   time.Duration
	DNSCheckInterval time.Duration
	Retention        time.Duration
	// RecordRetention is how long reports keep their records (0: as
	// long as the reports, --retention).
	RecordRetention time.Duration
	Alerts          alert.Rules
	// FailureRetention is how long failure reports are kept, by arrival
	// date; 0 keeps them forever.
	FailureRetention time.Duration
	// AuditRetention is how long audit log entries are kept (0: forever).
	AuditRetention time.Duration
	// WebKeySignIn lets the web sign-in form take API keys.
	WebKeySignIn bool
	// Webhooks are the delivery settings (--webhook-*).
	Webhooks webhookOptions
	// Senders are the sender-intelligence settings (--rdns-rate, --sender-map).
	Senders sendersOptions
	// PublicURL is the URL people and reporters reach dmarcd by: Secure
	// cookies and the Origin check of the web interface, and TLS reports
	// POSTed to <PublicURL>/tlsrpt/<local part>.
	PublicURL string
	// TLSRPTRateLimit is the TLS report POSTs allowed per minute per
	// client address.
	TLSRPTRateLimit int
	// TrustedProxies are the reverse proxies (CIDRs or addresses) whose
	// X-Forwarded-For gives the client address; proxies is them parsed
	// (by validate).
	TrustedProxies []string
	proxies        *clientaddr.Proxies
	// IMAP are the mailbox intake settings (--imap-*).
	IMAP imapOptions
	// Mail are the outbound mail settings (--mail-*).
	Mail mailOptions
	// Export is the ClickHouse sink (--export-clickhouse*, issue 28).
	Export exportOptions
	// OIDC are the single sign-on settings (--oidc-*).
	OIDC oidcOptions
}

// sendersOptions configure the sources, senders and policy-advice views.
type sendersOptions struct {
	RDNSRate  float64
	SenderMap string
}

func (o *sendersOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Float64Var(&o.RDNSRate, "rdns-rate", senders.DefaultRDNSRate, "reverse DNS lookups of new report sources per second at most (each: a PTR query and the forward check of its names)")
	f.StringVar(&o.SenderMap, "sender-map", "", "CSV file of known senders (base_reverse_dns,name,type) that adds to or replaces rows of the embedded map")
}

func (o *serveOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the REST API (HOST:PORT; port 0 picks a free one)")
	f.StringVar(&o.ReportingDomain, "reporting-domain", "", "domain of the reporting addresses: its MX must point at this server (default: this host's name)")
	f.StringSliceVar(&o.DNSServers, "dns-server", nil, "DNS server HOST:PORT, repeatable (default: the servers of /etc/resolv.conf)")
	durationVar(f, &o.DNSTimeout, "dns-timeout", 2*time.Second, "timeout of one DNS query attempt")
	f.IntVar(&o.RateLimit, "rate-limit", 100, "API requests per minute allowed per API key")
	f.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	durationVar(f, &o.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long requests in flight may finish after SIGINT/SIGTERM")
	f.StringVar(&o.SMTPListen, "smtp-listen", "127.0.0.1:2525", `address of the SMTP listener receiving reports (HOST:PORT; "" disables it)`)
	f.StringVar(&o.SMTPHostname, "smtp-hostname", "", "name in the SMTP greeting (default: the reporting domain)")
	f.Int64Var(&o.SMTPMaxBytes, "smtp-max-bytes", smtp.DefaultMaxBytes, "largest message accepted, in bytes (larger: 552 5.3.4)")
	f.IntVar(&o.SMTPMaxConns, "smtp-max-conns", smtp.DefaultMaxConns, "SMTP connections served at once (more: 421, try later)")
	f.IntVar(&o.SMTPMaxConnsPerIP, "smtp-max-conns-per-ip", smtp.DefaultMaxConnsPerIP, "SMTP connections served at once from one client address (more: 421, try later)")
	durationVar(f, &o.SMTPCommandTimeout, "smtp-command-timeout", smtp.DefaultCommandTimeout, "how long an SMTP client may stay silent before its first command and between commands")
	durationVar(f, &o.SMTPReadTimeout, "smtp-read-timeout", smtp.DefaultReadTimeout, "how long an SMTP client may stay silent within a message")
	durationVar(f, &o.SMTPWriteTimeout, "smtp-write-timeout", smtp.DefaultWriteTimeout, "how long writing one SMTP reply may take")
	f.StringVar(&o.SMTPTLSCert, "smtp-tls-cert", "", "PEM certificate (chain) for STARTTLS; with --smtp-tls-key")
	f.StringVar(&o.SMTPTLSKey, "smtp-tls-key", "", "PEM private key for STARTTLS; with --smtp-tls-cert")
	f.Int64Var(&o.QuarantineMaxBytes, "quarantine-max-bytes", ingest.DefaultQuarantineTotalBytes, "bytes the quarantine keeps in all: past nine tenths of it only the headers of an input are kept, past it such mail is refused (552)")
	durationVar(f, &o.QuarantineRetention, "quarantine-retention", worker.DefaultQuarantineRetention, "delete quarantine entries received longer ago than this, e.g. 30d (checked hourly; 0 keeps them)")
	o.addJobFlags(cmd)
	o.addAlertRuleFlags(cmd)
	o.Webhooks.AddFlags(cmd)
	o.Senders.AddFlags(cmd)
	o.IMAP.AddFlags(cmd)
	o.Mail.AddFlags(cmd)
	o.Export.AddFlags(cmd)
	o.OIDC.AddFlags(cmd)
	o.Geo.AddFlags(cmd, "for geolocating report sources (reloaded on SIGHUP)")
	f.StringVar(&o.PublicURL, "public-url", "", "URL people and reporters reach dmarcd by (scheme included, e.g. https://dmarc.example.net): the web interface's Secure cookie and Origin check, and POST /tlsrpt/<local part> for TLS reports (default: the request's host; no TLS report POSTs)")
	f.IntVar(&o.TLSRPTRateLimit, "tlsrpt-rate-limit", tlshttps.DefaultRateLimit, "TLS report POSTs per minute allowed per client address")
	f.StringSliceVar(&o.TrustedProxies, "trusted-proxy", nil, "reverse proxy address or CIDR whose X-Forwarded-For names the client, repeatable (e.g. 127.0.0.1): the per-address limits and the sign-in log then see the client, not the proxy (default: none; the header is ignored)")
	f.BoolVar(&o.WebKeySignIn, "web-key-sign-in", true, "let the web interface's sign-in take an API key beside email and password (false: people only; the API still takes keys)")
	f.BoolVar(&o.Demo, "demo", false, "load sample reports for the domain "+demoDomain+" (organization default) at start")
}

func newServeCommand(g *globalOptions) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the dmarcd service: web interface, REST API, SMTP listener, admin socket and scheduler",
		Long: `Run dmarcd: the web interface and the REST API on --listen (open
http://127.0.0.1:8080/ in a browser and sign in with an API key; the API is
under /api/v1/), the SMTP listener receiving reports on --smtp-listen, the
admin socket <data-dir>/dmarcd.sock (mode 0600, used by the other commands
while the server runs) and the scheduler. It stops gracefully on SIGINT or
SIGTERM, and reloads the --geoip-* databases on SIGHUP (a file that fails
to load leaves the old one in use).

The SMTP listener accepts mail only for the reporting addresses of
registered domains (550 5.1.1 otherwise, before the message is sent),
refuses messages over --smtp-max-bytes (552 5.3.4), and acknowledges a
message (250) only once it is durably stored or quarantined; when storing
fails the sender gets 451 4.3.0 and retries later. STARTTLS is offered
with --smtp-tls-cert and --smtp-tls-key.

On an empty database it creates the organization "default" (plan
unlimited) and one API key with full scope, and prints that key once with
the web interface's address (on no terminal, the key goes to
<data-dir>/bootstrap-key instead).
--demo also registers the domain ` + demoDomain + ` in "default" and loads
two weeks of sample reports for it (again on each start: reports already
there are recognized as duplicates and not stored twice).

Every flag can also be set with an environment variable DMARCD_<FLAG>:
upper case, dashes as underscores, lists comma-separated, e.g.
DMARCD_LISTEN=0.0.0.0:8080 or DMARCD_DNS_SERVER=1.1.1.1:53,8.8.8.8:53.
A flag given on the command line wins over the environment.

Endpoints without a key: /healthz (up), /readyz (database open and
listeners serving), /metrics (Prometheus) and /api/v1/openapi.json.`,
		Example: `  dmarcd serve --demo
  # Behind a TLS reverse proxy on this host: the web interface and API stay
  # on loopback, SMTP receives reports from the Internet.
  dmarcd serve --data-dir /var/lib/dmarcd --reporting-domain reports.example.net \
      --listen 127.0.0.1:8080 --public-url https://dmarc.example.net --trusted-proxy 127.0.0.1 \
      --smtp-listen 0.0.0.0:25 --geoip-city GeoLite2-City.mmdb --geoip-asn GeoLite2-ASN.mmdb
  DMARCD_LOG_FORMAT=json dmarcd serve`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), g, o)
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func (o *serveOptions) validate() error {
	switch {
	case o.RateLimit < 1:
		return usagef("--rate-limit must be at least 1")
	case o.SMTPMaxBytes < 1:
		return usagef("--smtp-max-bytes must be at least 1")
	case o.SMTPMaxConns < 1:
		return usagef("--smtp-max-conns must be at least 1")
	case o.SMTPMaxConnsPerIP < 1:
		return usagef("--smtp-max-conns-per-ip must be at least 1")
	case o.SMTPCommandTimeout <= 0:
		return usagef("--smtp-command-timeout must be positive")
	case o.QuarantineMaxBytes < 1<<20:
		return usagef("--quarantine-max-bytes must be at least 1048576 (1 MiB)")
	case o.VerifyInterval <= 0 || o.DNSCheckInterval <= 0:
		return usagef("--verify-interval and --dns-check-interval must be positive")
	case o.Retention < 0:
		return usagef("--retention must not be negative (0 keeps reports and alerts forever)")
	case o.RecordRetention < 0:
		return usagef("--record-retention must not be negative (0 keeps records as long as their reports)")
	case o.Alerts.Validate() != nil:
		return usagef("alert thresholds (--alert-*): %v", o.Alerts.Validate())
	case o.SMTPReadTimeout <= 0 || o.SMTPWriteTimeout <= 0:
		return usagef("--smtp-read-timeout and --smtp-write-timeout must be positive")
	case (o.SMTPTLSCert == "") != (o.SMTPTLSKey == ""):
		return usagef("--smtp-tls-cert and --smtp-tls-key go together")
	case o.AuditRetention < 0:
		return usagef("--audit-retention must not be negative")
	case o.FailureRetention < 0:
		return usagef("--failure-retention must not be negative (0 keeps failure reports forever)")
	case o.TLSRPTRateLimit < 1:
		return usagef("--tlsrpt-rate-limit must be at least 1")
	}
	proxies, err := clientaddr.ParseProxies(o.TrustedProxies)
	if err != nil {
		return usagef("--trusted-proxy: %v", err)
	}
	o.proxies = proxies
	return o.checkPublicURL()
}

// checkPublicURL accepts an absolute http or https URL without query or
// fragment, and drops its trailing slash.
func (o *serveOptions) checkPublicURL() error {
	if o.PublicURL == "" {
		return nil
	}
	u, err := url.Parse(o.PublicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return usagef("--public-url must be an http or https URL like https://dmarc.example.net, not %q", o.PublicURL)
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	return nil
}

// addJobFlags adds the flags of the scheduler's jobs: re-verification, DNS
// change detection and retention.
func (o *serveOptions) addJobFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	durationVar(f, &o.VerifyInterval, "verify-interval", worker.DefaultVerifyInterval, "how often pending and inactive domains are verified again (they turn active once their DNS lists the reporting address)")
	durationVar(f, &o.DNSCheckInterval, "dns-check-interval", worker.DefaultDNSCheckInterval, "how often each active or inactive domain's DMARC record is checked for changes (the checks are spread over the interval)")
	durationVar(f, &o.Retention, "retention", worker.DefaultRetention, "delete aggregate reports that ended longer ago than this, with their daily statistics, and older alerts (checked hourly; 0 keeps them forever)")
	durationVar(f, &o.RecordRetention, "record-retention", 0, "drop the records of aggregate reports that began longer ago than this, keeping the reports and every statistic for --retention (checked hourly; 0 or longer than --retention: records go with their reports)")
	durationVar(f, &o.FailureRetention, "failure-retention", 90*24*time.Hour, "delete failure (forensic) reports that arrived longer ago than this (checked hourly; 0 keeps them forever)")
	durationVar(f, &o.FailureRetention, "forensic-retention", 90*24*time.Hour, "the former name of --failure-retention")
	deprecatedAlias(f, "forensic-retention", "failure-retention")
	durationVar(f, &o.AuditRetention, "audit-retention", worker.DefaultAuditRetention, "delete audit log entries older than this (checked hourly; 0 keeps them forever)")
}

// addAlertRuleFlags adds the thresholds of the report alert rules.
func (o *serveOptions) addAlertRuleFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.Alerts = alert.DefaultRules()
	f.Float64Var(&o.Alerts.FailureRateWarning, "alert-failure-rate-warning", o.Alerts.FailureRateWarning, "share of a report's messages failing DMARC (0-1) that raises a warning alert")
	f.Float64Var(&o.Alerts.FailureRateCritical, "alert-failure-rate-critical", o.Alerts.FailureRateCritical, "share of a report's messages failing DMARC (0-1) that raises a critical alert")
	f.Int64Var(&o.Alerts.MinFailing, "alert-min-failing", o.Alerts.MinFailing, "fewest messages failing DMARC in a report for a failure rate alert")
	f.IntVar(&o.Alerts.NewSourceDays, "alert-new-source-days", o.Alerts.NewSourceDays, "a source IP with failing mail not seen for the domain in this many days raises a new_failing_source alert")
}

// webhookOptions are the flags of webhook deliveries.
type webhookOptions struct {
	AllowPrivate bool
	CAFile       string
	RetryDelays  []time.Duration
	Concurrency  int
}

func (o *webhookOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.AllowPrivate, "webhook-allow-private", false, "let webhooks reach loopback, private and link-local addresses (refused by default, at creation and at every connection)")
	f.StringVar(&o.CAFile, "webhook-ca-file", "", "PEM file of certificate authorities trusted for webhook receivers, besides the system's")
	durationSliceVar(f, &o.RetryDelays, "webhook-retry-delays", worker.DefaultRetryDelays(), "waits before each retry of a failed webhook delivery, comma-separated (one attempt more than delays)")
	f.IntVar(&o.Concurrency, "webhook-concurrency", worker.DefaultDeliverConcurrency, "webhook deliveries in flight at once")
}

// smtpTLS loads the STARTTLS certificate, or returns nil without one.
func (o *serveOptions) smtpTLS() (*tls.Config, error) {
	if o.SMTPTLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.SMTPTLSCert, o.SMTPTLSKey)
	if err != nil {
		return nil, fmt.Errorf("--smtp-tls-cert %s / --smtp-tls-key %s: %w", o.SMTPTLSCert, o.SMTPTLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
