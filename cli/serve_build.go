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
	"strings"
	"sync/atomic"
	"time"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/export/clickhouse"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/ingest"
	tlshttps "github.com/dmarcd/dmarcd/ingest/https"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/ingest/smtp"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/web"
	"github.com/dmarcd/dmarcd/webhook"
	"github.com/dmarcd/dmarcd/worker"
)

// server is what 'dmarcd serve' runs: built by newServer, started and
// stopped by run, released by close.
type server struct {
	g   *globalOptions
	o   serveOptions
	log *slog.Logger

	reportingDomain string
	smtpTLS         *tls.Config // nil: no STARTTLS
	geo             *geo.DB
	db              *store.DB
	reg             *metrics.Registry
	resolver        *dnscheck.Resolver
	dns             *dnscheck.Checker
	hooks           *webhook.Client
	hookPolicy      egress.Policy
	relay           *mailout.Relay // nil without --mail-relay
	views           *senders.Views
	pipeline        *ingest.Pipeline
	imap            *imapIntake
	tlsReports      http.Handler // nil without --public-url
	smtp            *smtp.Server
	app             *app.App
	api             *httpapi.Server
	apiSrv          *http.Server // the API and the web interface
	adminSrv        *http.Server
	sched           *worker.Scheduler
	rdns            *senders.RDNSJob
	senderWatch     *worker.SenderWatch // new_sender and policy_ready
	lns             *listeners
	firstKey        *firstKey        // created on an empty database, announced by run
	export          *clickhouse.Sink // nil without --export-clickhouse

	// ready is what /readyz reports: set once everything serves, cleared
	// when shutdown begins.
	ready atomic.Bool
}

// newServer checks the options and builds every component of serve in
// steps, each after those it needs: the store, the outbound clients, the
// intake, the application layer, HTTP, the jobs, and last the listeners.
// It creates the first organization and key on an empty database, but
// starts nothing (see run). On error it releases what it had acquired;
// usage errors name the flag.
func newServer(g *globalOptions, o serveOptions) (_ *server, err error) {
	log, err := newLogger(g.stderr, o.LogFormat, o.LogLevel)
	if err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &server{g: g, o: o, log: log}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.reportingDomain, err = resolveReportingDomain(o.ReportingDomain, log); err != nil {
		return nil, err
	}
	if s.smtpTLS, err = o.smtpTLS(); err != nil {
		return nil, err
	}
	for _, step := range []func() error{s.openStore, s.openClients, s.buildIntake, s.buildSMTP,
		s.buildApp, s.buildExport, s.buildHTTP, s.buildJobs, s.listen} {
		if err = step(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// openStore opens what serve keeps: the geolocation databases and the
// database in the data directory (whose never verified domains follow
// --reporting-domain), with the metrics registry and the alert rules.
func (s *server) openStore() (err error) {
	g := s.g
	if s.geo, err = geo.Open(s.o.Geo.config()); err != nil {
		return fmt.Errorf("geolocation database: %w", err)
	}
	if err := os.MkdirAll(g.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	s.db, err = store.Open(g.dbPath(), &store.Options{Timeout: time.Second})
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("another process (probably another 'dmarcd serve') holds %s; stop it or choose another --data-dir", g.dbPath())
	}
	if err != nil {
		return err
	}
	if err := rehomeUnverified(s.db, s.reportingDomain, s.log); err != nil {
		return err
	}
	s.reg = metrics.NewRegistry()
	registerBuildInfo(s.reg)
	registerDedupFilter(s.reg, s.db)
	return setAlertRules(s.db, s.o.Alerts, s.reg)
}

// openClients builds what serve asks the network with: the DNS resolver
// and checker, the webhook client under its address policy, and the
// sender views (SPF evaluated through the resolver).
func (s *server) openClients() (err error) {
	o := s.o
	if s.resolver, err = dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers, Timeout: o.DNSTimeout}); err != nil {
		return err
	}
	s.dns = &dnscheck.Checker{Resolver: s.resolver}
	if s.hooks, s.hookPolicy, err = o.Webhooks.client(s.resolver, s.log); err != nil {
		return err
	}
	known := senders.DefaultKnownSenders()
	if o.Senders.SenderMap != "" {
		if known, err = known.WithFile(o.Senders.SenderMap); err != nil {
			return usageError{fmt.Errorf("--sender-map: %w", err)}
		}
	}
	s.views = &senders.Views{DB: s.db, Known: known, SPF: senders.NewSPFCache(s.resolver, 0), DMARC: s.resolver}
	s.relay, err = o.Mail.relay(s.resolver, o.PublicURL, s.log)
	return err
}

// buildIntake builds the ingest pipeline and the ways into it besides
// SMTP: the IMAP mailboxes and, with --public-url, TLS reports over HTTPS.
func (s *server) buildIntake() (err error) {
	o, log := s.o, s.log
	if s.pipeline, err = ingest.New(ingest.Config{Store: s.db, Geo: s.geo, Logger: log, Metrics: s.reg, Now: time.Now,
		Retention: o.Retention, FailureRetention: o.FailureRetention,
		QuarantineTotalBytes: o.QuarantineMaxBytes}); err != nil {
		return err
	}
	if s.imap, err = newIMAPIntake(o.IMAP, s.g.DataDir, s.db, s.resolver, log, s.reg); err != nil {
		return err
	}
	s.imap.attach(imapin.PipelineSink{Pipeline: s.pipeline, Metrics: s.imap.in.Metrics}, o.IMAP.Interval)
	if o.PublicURL == "" {
		return nil
	}
	s.tlsReports, err = tlshttps.New(tlshttps.Config{Ingest: s.pipeline.Ingest, Store: s.db,
		ReportingDomain: s.reportingDomain, RateLimit: o.TLSRPTRateLimit, Logger: log})
	return err
}

// buildSMTP builds the SMTP server that hands mail to the pipeline.
func (s *server) buildSMTP() (err error) {
	o := s.o
	hostname := o.SMTPHostname
	if hostname == "" {
		hostname = s.reportingDomain
	}
	s.smtp, err = smtp.NewServer(smtp.Config{
		Intake:         s.pipeline,
		Hostname:       hostname,
		MaxBytes:       o.SMTPMaxBytes,
		MaxConns:       o.SMTPMaxConns,
		MaxConnsPerIP:  o.SMTPMaxConnsPerIP,
		CommandTimeout: o.SMTPCommandTimeout,
		ReadTimeout:    o.SMTPReadTimeout,
		WriteTimeout:   o.SMTPWriteTimeout,
		TLS:            s.smtpTLS,
		Logger:         s.log,
		Metrics:        s.reg,
	})
	return err
}

// buildApp builds the application layer: the operations the API, the web
// interface and the admin socket run, over the store, the outbound
// clients and the intake.
func (s *server) buildApp() error {
	// MTA-STS policy files (check-tls) are fetched under the webhook
	// address policy (--webhook-allow-private, --webhook-ca-file).
	fetcher := egress.NewClient(s.resolver, s.hookPolicy).WithTimeout(dnscheck.MTASTSBudget)
	s.app = app.New(app.Config{
		Store:            s.db,
		DNS:              s.dns,
		Published:        s.views,
		TLS:              &dnscheck.TLSChecker{Resolver: s.resolver, Fetcher: fetcher},
		ReportingDomain:  s.reportingDomain,
		PublicURL:        s.o.PublicURL,
		WebhookClient:    s.hooks,
		WebhookResolver:  s.resolver,
		WebhookPolicy:    s.hookPolicy,
		Mailboxes:        s.imap.in,
		Quarantine:       s.pipeline,
		Mail:             s.relay,
		Digests:          &digest.Builder{DB: s.db, Views: s.views},
		Logger:           s.log,
		DisableKeySignIn: !s.o.WebKeySignIn,
	})
	return nil
}

// buildHTTP builds the API and the web interface side by side on one mux
// (the server of --listen), and the admin socket's server.
func (s *server) buildHTTP() error {
	o, log := s.o, s.log
	s.api = httpapi.New(httpapi.Config{App: s.app, Store: s.db, Senders: s.views, RateLimit: o.RateLimit,
		Logger: log, Metrics: s.reg, Version: version(), TLSReports: s.tlsReports, Ready: s.readiness})
	oidc, err := o.OIDC.config(o.PublicURL, s.resolver)
	if err != nil {
		return err
	}
	ui, err := web.New(web.Config{App: s.app, Store: s.db, DNS: s.dns, PublicURL: o.PublicURL, Logger: log, Senders: s.views,
		GeoIPCity: o.Geo.City != "", GeoIPASN: o.Geo.ASN != "", OIDC: oidc})
	if err != nil {
		return err
	}
	if oidc != nil {
		// An unreachable provider is said at once, and does not stop the
		// server: the first sign-in tries again.
		ctx, cancel := context.WithTimeout(context.Background(), oidcDiscoveryBudget)
		if err := ui.DiscoverOIDC(ctx); err != nil {
			log.Warn("single sign-on unavailable until the provider answers (the first sign-in tries again)", "error", err)
		} else {
			log.Info("single sign-on ready", "issuer", oidc.Issuer, "redirect_url", o.PublicURL+web.OIDCCallbackPath)
		}
		cancel()
	}
	mux := http.NewServeMux()
	mux.Handle("/", s.api.Observe("ui", ui)) // logged and counted as the API's requests are
	for _, p := range s.api.Paths() {
		mux.Handle(p, s.api)
	}
	s.apiSrv = &http.Server{
		// Every per-address limit and log line of the API and the web
		// interface reads the client address computed here
		// (--trusted-proxy).
		Handler:           o.proxies.Wrap(mux),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    httpapi.HTTPServerMaxHeaderBytes, // a backstop: the API answers 431 in JSON above httpapi.MaxHeaderBytes
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	s.adminSrv = &http.Server{
		Handler: admin.Handler(&admin.Local{DB: s.db, App: s.app, Pipeline: s.pipeline, Views: s.views, Export: s.export,
			WebURL: webURL(o.Listen, o.PublicURL)}, log),
		ReadHeaderTimeout: 10 * time.Second,
	}
	return nil
}

// readiness is /readyz: ready once everything serves, until shutdown.
func (s *server) readiness() error {
	if !s.ready.Load() {
		return errors.New("starting")
	}
	return nil
}

// listen opens the sockets and, on an empty database, creates the first
// organization and key; run announces it once the server is up.
func (s *server) listen() (err error) {
	if s.lns, err = listen(s.g, s.o); err != nil {
		return err
	}
	s.firstKey, err = bootstrap(s.db, s.g, s.log)
	return err
}

// close releases what newServer acquired: the listeners (closed already
// by a run's shutdown) and the admin socket's file, idle webhook
// connections, the store and the geolocation databases.
func (s *server) close() {
	if s.lns != nil {
		s.lns.close()
		os.Remove(s.g.socketPath())
	}
	if s.hooks != nil {
		s.hooks.CloseIdleConnections()
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.geo != nil {
		s.geo.Close()
	}
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

// setAlertRules gives the store the alert thresholds and counts the alerts
// raised in dmarcd_alerts_raised_total.
func setAlertRules(db *store.DB, rules alert.Rules, reg *metrics.Registry) error {
	if err := db.SetAlertRules(rules); err != nil {
		return usagef("alert thresholds (--alert-*): %v", err)
	}
	raised := reg.Counter("dmarcd_alerts_raised_total", "Alerts raised, by type and severity.", "type", "severity")
	db.OnAlert(func(a *store.Alert) { raised.With(a.Type, a.Severity).Inc() })
	return nil
}

// buildJobs builds the scheduler with every periodic job of serve (all of
// them package worker's), and the reverse DNS job, which runs on its own.
func (s *server) buildJobs() error {
	o, db, log := s.o, s.db, s.log
	s.sched = worker.New(log, nil)
	observeJobs(s.sched, s.reg)
	s.senderWatch = &worker.SenderWatch{Store: db, Views: s.views, Log: log}
	s.rdns = senders.NewRDNSJob(db, s.resolver, senders.RDNSConfig{Rate: o.Senders.RDNSRate, Resolved: s.senderWatch.Resolved})
	reverify := &worker.Reverify{Store: db, Checker: s.dns, Log: log}
	s.sched.Add(worker.Job{Name: "reverify", Every: o.VerifyInterval, AtStart: true, Run: reverify.Run})
	s.sched.Add((&worker.DNSWatch{Store: db, Resolver: s.resolver, Interval: o.DNSCheckInterval, Log: log}).Job())
	s.sched.Add((&worker.Retention{Store: db, Retention: o.Retention, FailureRetention: o.FailureRetention,
		QuarantineRetention: o.QuarantineRetention, RecordRetention: o.RecordRetention, RecordsExported: s.exportGate(), Log: log}).Job())
	s.sched.Add((&worker.Seal{Store: db, Log: log}).Job())
	deliverer, err := worker.NewDeliverer(worker.DeliverConfig{Store: db, Client: s.hooks, RetryDelays: o.Webhooks.RetryDelays,
		Concurrency: o.Webhooks.Concurrency, Logger: log, Metrics: s.reg, PublicURL: o.PublicURL})
	if err != nil {
		return err
	}
	s.sched.Add(worker.Job{Name: "webhook-deliveries", Every: worker.DefaultDeliverEvery, AtStart: true, Run: deliverer.DeliverDue})
	s.sched.Add(s.senderWatch.Job())
	s.sched.Add((&worker.SessionSweep{Store: db}).Job())
	s.sched.Add((&worker.KeyUsage{Keys: s.app}).Job())
	if s.o.AuditRetention > 0 {
		s.sched.Add((&worker.AuditRetention{Audit: s.app, Retention: s.o.AuditRetention}).Job())
	}
	s.mailJobs()
	return nil
}

// observeJobs counts and times every run of the scheduler's jobs.
func observeJobs(sched *worker.Scheduler, reg *metrics.Registry) {
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
}

// client builds the webhook client: it resolves with the server's DNS
// servers and refuses non-public addresses unless AllowPrivate.
func (o *webhookOptions) client(resolver *dnscheck.Resolver, log *slog.Logger) (*webhook.Client, egress.Policy, error) {
	p := egress.Policy{AllowPrivate: o.AllowPrivate}
	if o.Concurrency < 1 {
		return nil, p, usagef("--webhook-concurrency must be at least 1")
	}
	for _, d := range o.RetryDelays {
		if d <= 0 {
			return nil, p, usagef("--webhook-retry-delays must all be positive, got %s", d)
		}
	}
	if o.CAFile != "" {
		pool, err := egress.LoadCAFile(o.CAFile)
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

// hostname is os.Hostname, replaced in tests.
var hostname = os.Hostname

// resolveReportingDomain is --reporting-domain, else the host name. A name
// that cannot receive mail from the Internet is allowed (for trying dmarcd
// out) but logged as a warning naming the flag to set.
func resolveReportingDomain(flag string, log *slog.Logger) (string, error) {
	name := flag
	if name == "" {
		host, err := hostname()
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
		log.Warn(fmt.Sprintf("this host's name %q is no usable reporting domain (%v): set --reporting-domain "+
			"(or DMARCD_REPORTING_DOMAIN) to a domain whose MX points at this server, e.g. --reporting-domain reports.example.net; "+
			"until then reporting addresses receive no mail, and those of unverified domains follow the flag when you set it", name, err),
			"hostname", name)
		return strings.ToLower(strings.TrimSuffix(name, ".")), nil
	}
	if flag == "" {
		log.Warn("--reporting-domain not set: using this host's name "+norm+"; set --reporting-domain (or DMARCD_REPORTING_DOMAIN) "+
			"to the domain whose MX points at this server", "reporting_domain", norm)
	}
	return norm, nil
}

// rehomeUnverified moves the addresses of never verified domains to the
// current reporting domain (see store.DB.RehomeUnverified) and logs each.
func rehomeUnverified(db *store.DB, reportingDomain string, log *slog.Logger) error {
	moved, err := db.RehomeUnverified(reportingDomain)
	if err != nil {
		return fmt.Errorf("moving unverified domains to --reporting-domain %s: %w", reportingDomain, err)
	}
	for _, m := range moved {
		log.Info("unverified domain's reporting address follows --reporting-domain", "domain", m.Name,
			"domain_id", m.DomainID, "from", m.From, "to", m.To)
	}
	return nil
}

// registerDedupFilter exposes the memory and work of the store's filter of
// report identities (the dedup check of aggregate reports).
func registerDedupFilter(reg *metrics.Registry, db *store.DB) {
	reg.GaugeFunc("dmarcd_dedup_filter_reports", "Aggregate report identities in the in-memory dedup filter.",
		func() float64 { return float64(db.DedupFilterStats().Reports) })
	reg.GaugeFunc("dmarcd_dedup_filter_bytes", "Memory of the in-memory dedup filter of aggregate reports.",
		func() float64 { return float64(db.DedupFilterStats().Bytes) })
	reg.CounterFunc("dmarcd_dedup_scans_total", "Scans of a domain's reports the dedup filter could not spare: a report sent again with other dates, or a false positive.",
		func() float64 { return float64(db.DedupFilterStats().Scans) })
}
