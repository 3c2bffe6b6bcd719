package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/demo"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/web"
	"github.com/dmarcd/dmarcd/webhook"
	"github.com/dmarcd/dmarcd/worker"
)

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

	SMTPListen       string
	SMTPHostname     string
	SMTPMaxBytes     int64
	SMTPMaxConns     int
	SMTPReadTimeout  time.Duration
	SMTPWriteTimeout time.Duration
	SMTPTLSCert      string
	SMTPTLSKey       string
	Geo              geoOptions
	Demo             bool

	// The scheduler's jobs (worker/) and the alert rules' thresholds.
	VerifyInterval   time.Duration
	DNSCheckInterval time.Duration
	Retention        time.Duration
	Alerts           store.AlertRules
	// ForensicRetention is how long failure reports are kept, by arrival
	// date; 0 keeps them forever.
	ForensicRetention time.Duration
	// Webhooks are the delivery settings (--webhook-*).
	Webhooks webhookOptions
	// PublicURL is the URL people reach dmarcd by (web interface: Secure
	// cookies and the Origin check).
	PublicURL string
}

func (o *serveOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the REST API (HOST:PORT; port 0 picks a free one)")
	f.StringVar(&o.ReportingDomain, "reporting-domain", "", "domain of the reporting addresses: its MX must point at this server (default: this host's name)")
	f.StringSliceVar(&o.DNSServers, "dns-server", nil, "DNS server HOST:PORT, repeatable (default: the servers of /etc/resolv.conf)")
	f.DurationVar(&o.DNSTimeout, "dns-timeout", 2*time.Second, "timeout of one DNS query attempt")
	f.IntVar(&o.RateLimit, "rate-limit", 100, "API requests per minute allowed per API key")
	f.StringVar(&o.LogFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "how long requests in flight may finish after SIGINT/SIGTERM")
	f.StringVar(&o.SMTPListen, "smtp-listen", "127.0.0.1:2525", `address of the SMTP listener receiving reports (HOST:PORT; "" disables it)`)
	f.StringVar(&o.SMTPHostname, "smtp-hostname", "", "name in the SMTP greeting (default: the reporting domain)")
	f.Int64Var(&o.SMTPMaxBytes, "smtp-max-bytes", ingest.DefaultSMTPMaxBytes, "largest message accepted, in bytes (larger: 552 5.3.4)")
	f.IntVar(&o.SMTPMaxConns, "smtp-max-conns", ingest.DefaultSMTPMaxConns, "SMTP connections served at once (more: 421, try later)")
	f.DurationVar(&o.SMTPReadTimeout, "smtp-read-timeout", ingest.DefaultSMTPReadTimeout, "how long an SMTP client may stay silent (between commands and within a message)")
	f.DurationVar(&o.SMTPWriteTimeout, "smtp-write-timeout", ingest.DefaultSMTPWriteTimeout, "how long writing one SMTP reply may take")
	f.StringVar(&o.SMTPTLSCert, "smtp-tls-cert", "", "PEM certificate (chain) for STARTTLS; with --smtp-tls-key")
	f.StringVar(&o.SMTPTLSKey, "smtp-tls-key", "", "PEM private key for STARTTLS; with --smtp-tls-cert")
	o.addAlertFlags(cmd)
	o.Webhooks.AddFlags(cmd)
	o.Geo.AddFlags(cmd, "for geolocating report sources (reloaded on SIGHUP)")
	f.BoolVar(&o.Demo, "demo", false, "load sample reports for the domain "+demo.Domain+" (organization default) at start")
	f.StringVar(&o.PublicURL, "public-url", "", "URL people reach dmarcd by, e.g. https://dmarc.example.net (web interface: Secure cookie, Origin check; default: the request's host)")
	f.DurationVar(&o.ForensicRetention, "forensic-retention", 90*24*time.Hour, "delete forensic (failure) reports that arrived longer ago than this (checked hourly; 0 keeps them forever)")
}

func newServeCommand(g *globalOptions) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the dmarcd service: REST API, SMTP listener, admin socket and scheduler",
		Long: `Run dmarcd: the REST API on --listen, the SMTP listener receiving reports on
--smtp-listen, the admin socket <data-dir>/dmarcd.sock (mode 0600, used by
the other commands while the server runs) and the scheduler. It stops
gracefully on SIGINT or SIGTERM, and reloads the --geoip-* databases on
SIGHUP (a file that fails to load leaves the old one in use).

The SMTP listener accepts mail only for the reporting addresses of
registered domains (550 5.1.1 otherwise, before the message is sent),
refuses messages over --smtp-max-bytes (552 5.3.4), and acknowledges a
message (250) only once it is durably stored or quarantined; when storing
fails the sender gets 451 4.3.0 and retries later. STARTTLS is offered
with --smtp-tls-cert and --smtp-tls-key.

On an empty database it creates the organization "default" (plan
unlimited) and one API key with full scope, and prints that key once.
--demo also registers the domain ` + demo.Domain + ` in "default" and loads
two weeks of sample reports for it (again on each start: reports already
there are recognized as duplicates and not stored twice).

Every flag can also be set with an environment variable DMARCD_<FLAG>:
upper case, dashes as underscores, lists comma-separated, e.g.
DMARCD_LISTEN=0.0.0.0:8080 or DMARCD_DNS_SERVER=1.1.1.1:53,8.8.8.8:53.
A flag given on the command line wins over the environment.

Endpoints without a key: /healthz (up), /readyz (database open and
listeners serving), /metrics (Prometheus) and /api/v1/openapi.json.`,
		Example: `  dmarcd serve --demo
  dmarcd serve --data-dir /var/lib/dmarcd --listen 0.0.0.0:8080 --reporting-domain reports.example.net \
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

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

func runServe(ctx context.Context, g *globalOptions, o serveOptions) error {
	log, err := newLogger(g.stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	reportingDomain, err := resolveReportingDomain(o.ReportingDomain, log)
	if err != nil {
		return err
	}
	tlsCfg, err := o.smtpTLS()
	if err != nil {
		return err
	}
	geoDB, err := geo.Open(o.Geo.config())
	if err != nil {
		return fmt.Errorf("geolocation database: %w", err)
	}
	defer geoDB.Close()
	if err := os.MkdirAll(g.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	db, err := store.Open(g.dbPath(), &store.Options{Timeout: time.Second})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("another process (probably another 'dmarcd serve') holds %s; stop it or choose another --data-dir", g.dbPath())
	}
	if err != nil {
		return err
	}
	defer db.Close()

	resolver, err := dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers, Timeout: o.DNSTimeout})
	if err != nil {
		return err
	}
	hooks, hookPolicy, err := o.Webhooks.client(resolver, log)
	if err != nil {
		return err
	}
	defer hooks.CloseIdleConnections()
	reg := metrics.NewRegistry()
	if err := setAlertRules(db, o.Alerts, reg); err != nil {
		return err
	}
	var ready atomic.Bool
	api := httpapi.New(httpapi.Config{
		Store:           db,
		DNS:             &dnscheck.Checker{Resolver: resolver},
		ReportingDomain: reportingDomain,
		RateLimit:       o.RateLimit,
		Logger:          log,
		Metrics:         reg,
		Version:         version(),
		WebhookClient:   hooks,
		WebhookResolver: resolver,
		WebhookPolicy:   hookPolicy,
		Ready: func() error {
			if !ready.Load() {
				return errors.New("starting")
			}
			return nil
		},
	})
	ui, err := web.New(web.Config{Store: db, DNS: &dnscheck.Checker{Resolver: resolver}, ReportingDomain: reportingDomain,
		PublicURL: o.PublicURL, Limiter: api, Webhooks: api, Logger: log})
	if err != nil {
		return err
	}
	api.MountUI(ui)
	pipeline, err := ingest.New(ingest.Config{Store: db, Geo: geoDB, Logger: log, Metrics: reg, Now: time.Now})
	if err != nil {
		return err
	}
	hostname := o.SMTPHostname
	if hostname == "" {
		hostname = reportingDomain
	}
	smtpSrv, err := ingest.NewSMTPServer(ingest.SMTPConfig{
		Pipeline:     pipeline,
		Hostname:     hostname,
		MaxBytes:     o.SMTPMaxBytes,
		MaxConns:     o.SMTPMaxConns,
		ReadTimeout:  o.SMTPReadTimeout,
		WriteTimeout: o.SMTPWriteTimeout,
		TLS:          tlsCfg,
		Logger:       log,
		Metrics:      reg,
	})
	if err != nil {
		return err
	}

	lns, err := listen(g, o)
	if err != nil {
		return err
	}
	defer os.Remove(g.socketPath())
	if err := bootstrap(db, g, lns.api.Addr().String(), log); err != nil {
		lns.close()
		return err
	}

	// The pipeline runs first and stops last: every server hands it work
	// until it has shut down.
	pipeCtx, stopPipeline := context.WithCancel(context.WithoutCancel(ctx))
	defer stopPipeline()
	errc := make(chan error, 4)
	pipeDone := make(chan struct{})
	go func() {
		defer close(pipeDone)
		if err := pipeline.Run(pipeCtx); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("ingest pipeline: %w", err)
		}
	}()
	if o.Demo {
		loadDemo(ctx, db, pipeline, reportingDomain, log)
	}

	apiSrv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	adminSrv := &http.Server{
		Handler:           admin.Handler(&admin.Local{DB: db, FlushKeyUsage: api.FlushKeyUsage, Pipeline: pipeline}, log),
		ReadHeaderTimeout: 10 * time.Second,
	}
	sched := worker.New(log, nil)
	o.scheduleAlertJobs(sched, db, resolver, reg, log)
	deliverer, err := worker.NewDeliverer(worker.DeliverConfig{Store: db, Client: hooks, RetryDelays: o.Webhooks.RetryDelays,
		Concurrency: o.Webhooks.Concurrency, Logger: log, Metrics: reg})
	if err != nil {
		return err
	}
	sched.Add(worker.Job{Name: "webhook-deliveries", Every: worker.DefaultDeliverEvery, AtStart: true, Run: deliverer.DeliverDue})
	sched.Add(worker.Job{Name: "flush-key-usage", Every: time.Minute, Run: func(context.Context, time.Time) error {
		return api.FlushKeyUsage()
	}})

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	serve := func(name string, srv *http.Server, ln net.Listener) {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s server: %w", name, err)
		}
	}
	wg.Add(3)
	go serve("API", apiSrv, lns.api)
	go serve("admin", adminSrv, lns.admin)
	go func() { defer wg.Done(); sched.Run(runCtx) }()
	smtpAddr := ""
	if lns.smtp != nil {
		smtpAddr = lns.smtp.Addr().String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := smtpSrv.Serve(lns.smtp); err != nil {
				errc <- fmt.Errorf("SMTP server: %w", err)
			}
		}()
	}
	reloadGeoOnHUP(runCtx, geoDB, log, &wg)
	ready.Store(true)
	log.Info("dmarcd started", "version", version(), "api", lns.api.Addr().String(), "smtp", smtpAddr,
		"smtp_starttls", tlsCfg != nil, "admin_socket", g.socketPath(), "data_dir", g.DataDir,
		"reporting_domain", reportingDomain, "dns_servers", strings.Join(resolver.Servers(), ","),
		"rate_limit", o.RateLimit, "geo", geoDB.Description())

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case runErr = <-errc:
		log.Error("server failed, shutting down", "error", runErr)
	}
	ready.Store(false)
	stop()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	if err := apiSrv.Shutdown(shutCtx); err != nil {
		log.Warn("API shutdown", "error", err)
	}
	if err := adminSrv.Shutdown(shutCtx); err != nil {
		log.Warn("admin socket shutdown", "error", err)
	}
	if lns.smtp != nil {
		if err := smtpSrv.Shutdown(shutCtx); err != nil {
			log.Warn("SMTP shutdown", "error", err)
		}
	}
	wg.Wait()
	stopPipeline()
	<-pipeDone
	if err := api.FlushKeyUsage(); err != nil {
		log.Error("flushing API key usage", "error", err)
	}
	log.Info("dmarcd stopped")
	return runErr
}

func (o *serveOptions) validate() error {
	switch {
	case o.RateLimit < 1:
		return usagef("--rate-limit must be at least 1")
	case o.SMTPMaxBytes < 1:
		return usagef("--smtp-max-bytes must be at least 1")
	case o.SMTPMaxConns < 1:
		return usagef("--smtp-max-conns must be at least 1")
	case o.VerifyInterval <= 0 || o.DNSCheckInterval <= 0:
		return usagef("--verify-interval and --dns-check-interval must be positive")
	case o.Retention < 0:
		return usagef("--retention must not be negative (0 keeps reports and alerts forever)")
	case o.Alerts.Validate() != nil:
		return usagef("alert thresholds (--alert-*): %v", o.Alerts.Validate())
	case o.SMTPReadTimeout <= 0 || o.SMTPWriteTimeout <= 0:
		return usagef("--smtp-read-timeout and --smtp-write-timeout must be positive")
	case (o.SMTPTLSCert == "") != (o.SMTPTLSKey == ""):
		return usagef("--smtp-tls-cert and --smtp-tls-key go together")
	case o.ForensicRetention < 0:
		return usagef("--forensic-retention must not be negative (0 keeps forensic reports forever)")
	}
	return nil
}

// addAlertFlags adds the flags of the scheduler's jobs and the alert rules.
func (o *serveOptions) addAlertFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.Alerts = store.DefaultAlertRules()
	f.DurationVar(&o.VerifyInterval, "verify-interval", worker.DefaultVerifyInterval, "how often pending and inactive domains are verified again (they turn active once their DNS lists the reporting address)")
	f.DurationVar(&o.DNSCheckInterval, "dns-check-interval", worker.DefaultDNSCheckInterval, "how often each active or inactive domain's DMARC record is checked for changes (the checks are spread over the interval)")
	f.DurationVar(&o.Retention, "retention", worker.DefaultRetention, "delete aggregate reports that ended longer ago than this, with their daily statistics, and older alerts (checked hourly; 0 keeps them forever)")
	f.Float64Var(&o.Alerts.FailureRateWarning, "alert-failure-rate-warning", o.Alerts.FailureRateWarning, "share of a report's messages failing DMARC (0-1) that raises a warning alert")
	f.Float64Var(&o.Alerts.FailureRateCritical, "alert-failure-rate-critical", o.Alerts.FailureRateCritical, "share of a report's messages failing DMARC (0-1) that raises a critical alert")
	f.Int64Var(&o.Alerts.MinFailing, "alert-min-failing", o.Alerts.MinFailing, "fewest messages failing DMARC in a report for a failure rate alert")
	f.IntVar(&o.Alerts.NewSourceDays, "alert-new-source-days", o.Alerts.NewSourceDays, "a source IP with failing mail not seen for the domain in this many days raises a new_failing_source alert")
}

// setAlertRules gives the store the alert thresholds and counts the alerts
// raised in dmarcd_alerts_raised_total.
func setAlertRules(db *store.DB, rules store.AlertRules, reg *metrics.Registry) error {
	if err := db.SetAlertRules(rules); err != nil {
		return usagef("alert thresholds (--alert-*): %v", err)
	}
	raised := reg.Counter("dmarcd_alerts_raised_total", "Alerts raised, by type and severity.", "type", "severity")
	db.OnAlert(func(a *store.Alert) { raised.With(a.Type, a.Severity).Inc() })
	return nil
}

// scheduleAlertJobs adds re-verification, DNS change detection and
// retention to the scheduler, and the metrics of every job's runs.
func (o *serveOptions) scheduleAlertJobs(sched *worker.Scheduler, db *store.DB, resolver *dnscheck.Resolver, reg *metrics.Registry, log *slog.Logger) {
	runs := reg.Counter("dmarcd_scheduler_job_runs_total", "Runs of scheduler jobs, by job.", "job")
	failures := reg.Counter("dmarcd_scheduler_job_failures_total", "Runs of scheduler jobs that failed (or panicked), by job.", "job")
	took := reg.Histogram("dmarcd_scheduler_job_duration_seconds", "Duration of scheduler job runs in seconds, by job.",
		[]float64{0.001, 0.01, 0.1, 0.5, 1, 5, 30, 120, 600}, "job")
	sched.Observe(func(job string, d time.Duration, err error) {
		runs.With(job).Inc()
		took.With(job).Observe(d.Seconds())
		if err != nil {
			failures.With(job).Inc()
		}
	})
	reverify := &worker.Reverify{Store: db, Checker: &dnscheck.Checker{Resolver: resolver}, Log: log}
	sched.Add(worker.Job{Name: "reverify", Every: o.VerifyInterval, AtStart: true, Run: reverify.Run})
	sched.Add((&worker.DNSWatch{Store: db, Resolver: resolver, Interval: o.DNSCheckInterval, Log: log}).Job())
	sched.Add((&worker.Retention{Store: db, Retention: o.Retention, ForensicRetention: o.ForensicRetention, Log: log}).Job())
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
	f.DurationSliceVar(&o.RetryDelays, "webhook-retry-delays", worker.DefaultRetryDelays(), "waits before each retry of a failed webhook delivery, comma-separated (one attempt more than delays)")
	f.IntVar(&o.Concurrency, "webhook-concurrency", worker.DefaultDeliverConcurrency, "webhook deliveries in flight at once")
}

// client builds the webhook client: it resolves with the server's DNS
// servers and refuses non-public addresses unless AllowPrivate.
func (o *webhookOptions) client(resolver *dnscheck.Resolver, log *slog.Logger) (*webhook.Client, webhook.Policy, error) {
	p := webhook.Policy{AllowPrivate: o.AllowPrivate}
	if o.Concurrency < 1 {
		return nil, p, usagef("--webhook-concurrency must be at least 1")
	}
	for _, d := range o.RetryDelays {
		if d <= 0 {
			return nil, p, usagef("--webhook-retry-delays must all be positive, got %s", d)
		}
	}
	if o.CAFile != "" {
		pool, err := webhook.LoadCAFile(o.CAFile)
		if err != nil {
			return nil, p, usagef("--webhook-ca-file: %v", err)
		}
		p.RootCAs = pool
	}
	if o.AllowPrivate {
		log.Warn("--webhook-allow-private: webhooks may deliver to loopback, private and link-local addresses")
	}
	return webhook.NewClient(resolver, p), p, nil
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

// listeners are the sockets serve opens before it announces itself.
type listeners struct {
	api, admin, smtp net.Listener // smtp nil when disabled
}

func (l *listeners) close() {
	for _, ln := range []net.Listener{l.api, l.admin, l.smtp} {
		if ln != nil {
			ln.Close()
		}
	}
}

func listen(g *globalOptions, o serveOptions) (*listeners, error) {
	var l listeners
	var err error
	if l.api, err = net.Listen("tcp", o.Listen); err != nil {
		return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	if o.SMTPListen != "" {
		if l.smtp, err = net.Listen("tcp", o.SMTPListen); err != nil {
			l.close()
			return nil, fmt.Errorf("--smtp-listen %s: %w", o.SMTPListen, err)
		}
	}
	if l.admin, err = admin.Listen(g.socketPath()); err != nil {
		l.close()
		return nil, err
	}
	return &l, nil
}

// reloadGeoOnHUP reloads the geolocation databases on every SIGHUP until
// ctx ends; a failed reload keeps the databases in use.
func reloadGeoOnHUP(ctx context.Context, geoDB *geo.DB, log *slog.Logger, wg *sync.WaitGroup) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if !geoDB.Enabled() {
					log.Info("SIGHUP: no geolocation database configured, nothing to reload")
					continue
				}
				if err := geoDB.Reload(); err != nil {
					log.Error("SIGHUP: geolocation reload failed, the previous databases stay in use", "error", err)
					continue
				}
				log.Info("SIGHUP: geolocation databases reloaded", "geo", geoDB.Description())
			}
		}
	}()
}

// loadDemo loads the demo reports; a failure is logged, not fatal, since
// the demo is a convenience.
func loadDemo(ctx context.Context, db *store.DB, p *ingest.Pipeline, reportingDomain string, log *slog.Logger) {
	start := time.Now()
	sum, err := demo.Load(ctx, db, p, reportingDomain)
	if err != nil {
		log.Warn("--demo: sample reports not loaded", "error", err)
		return
	}
	log.Info("--demo: sample reports loaded", "domain", demo.Domain, "domain_id", sum.DomainID,
		"domain_created", sum.DomainCreated, "reports", sum.Reports, "records", sum.Records,
		"already_there", sum.Duplicates, "quarantined", sum.Quarantined, "duration", time.Since(start).Round(time.Millisecond))
}

// resolveReportingDomain is --reporting-domain, else the host name. A name
// that cannot receive mail from the Internet is allowed (for trying dmarcd
// out) but logged as a warning.
func resolveReportingDomain(flag string, log *slog.Logger) (string, error) {
	name := flag
	if name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		name = host
	}
	norm, err := dmarc.NormalizeDomain(name)
	if err != nil {
		if flag != "" {
			return "", usagef("--reporting-domain %q: %v", flag, err)
		}
		log.Warn("no usable --reporting-domain: reporting addresses will not receive mail until it is set to a domain whose MX points at this server",
			"hostname", name)
		return strings.ToLower(strings.TrimSuffix(name, ".")), nil
	}
	if flag == "" {
		log.Warn("--reporting-domain not set: using this host's name; set it to the domain whose MX points at this server", "reporting_domain", norm)
	}
	return norm, nil
}

// bootstrap creates the organization "default" and its first key on an
// empty database, and prints the key once, with a line to try it.
func bootstrap(db *store.DB, g *globalOptions, apiAddr string, log *slog.Logger) error {
	n, err := db.CountOrganizations()
	if err != nil || n > 0 {
		return err
	}
	org, err := db.CreateOrganization("default", store.PlanUnlimited)
	if err != nil {
		return err
	}
	key, secret, err := db.CreateAPIKey(org.ID, "bootstrap", store.ScopeFull)
	if err != nil {
		return err
	}
	log.Info("empty database: created organization default and its first API key", "org_id", org.ID, "key_prefix", key.Prefix)
	host := apiAddr
	if h, p, err := net.SplitHostPort(apiAddr); err == nil && net.ParseIP(h).IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]string{"organization": org.Name, "organization_id": org.ID, "api_key": secret})
	}
	fmt.Fprintf(g.stdout, `
dmarcd: this is a new database. Created organization "default" (plan unlimited)
and its first API key. The key is shown only this once; store it now:

    %s

Try it:

    curl -H 'X-API-Key: %s' http://%s/api/v1/domains

More keys: dmarcd keys create --org default --name NAME --data-dir %s

`, secret, secret, host, g.DataDir)
	return nil
}
