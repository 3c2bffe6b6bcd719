package cli

import (
	"context"
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
	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/ingest"
	tlshttps "github.com/dmarcd/dmarcd/ingest/https"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/ingest/smtp"
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
	smtpTLS         bool // STARTTLS is offered
	geo             *geo.DB
	db              *store.DB
	resolver        *dnscheck.Resolver
	hooks           *webhook.Client
	api             *httpapi.Server
	pipeline        *ingest.Pipeline
	smtp            *smtp.Server
	apiSrv          *http.Server
	adminSrv        *http.Server
	sched           *worker.Scheduler
	rdns            *senders.RDNSJob
	views           *senders.Views
	senderWatch     *worker.SenderWatch // new_sender and policy_ready
	imap            *imapIntake
	lns             *listeners

	// ready is what /readyz reports: set once everything serves, cleared
	// when shutdown begins.
	ready atomic.Bool
}

// newServer checks the options and builds every component of serve, each
// after those it needs: the store, DNS and webhook clients, the API, the
// pipeline and the SMTP server, the admin socket's server, the scheduler
// and its jobs, and last the listeners. It creates the first organization
// and key on an empty database, but starts nothing (see run). On error it
// releases what it had acquired; usage errors name the flag.
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
	tlsCfg, err := o.smtpTLS()
	if err != nil {
		return nil, err
	}
	s.smtpTLS = tlsCfg != nil
	if s.geo, err = geo.Open(o.Geo.config()); err != nil {
		return nil, fmt.Errorf("geolocation database: %w", err)
	}
	if err := os.MkdirAll(g.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	db, err := store.Open(g.dbPath(), &store.Options{Timeout: time.Second})
	if errors.Is(err, store.ErrLocked) {
		return nil, fmt.Errorf("another process (probably another 'dmarcd serve') holds %s; stop it or choose another --data-dir", g.dbPath())
	}
	if err != nil {
		return nil, err
	}
	s.db = db
	if err := rehomeUnverified(db, s.reportingDomain, log); err != nil {
		return nil, err
	}

	if s.resolver, err = dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers, Timeout: o.DNSTimeout}); err != nil {
		return nil, err
	}
	hooks, hookPolicy, err := o.Webhooks.client(s.resolver, log)
	if err != nil {
		return nil, err
	}
	s.hooks = hooks
	reg := metrics.NewRegistry()
	registerBuildInfo(reg)
	registerDedupFilter(reg, db)
	if err := setAlertRules(db, o.Alerts, reg); err != nil {
		return nil, err
	}
	if s.pipeline, err = ingest.New(ingest.Config{Store: db, Geo: s.geo, Logger: log, Metrics: reg, Now: time.Now,
		Retention: o.Retention, FailureRetention: o.FailureRetention,
		QuarantineTotalBytes: o.QuarantineMaxBytes}); err != nil {
		return nil, err
	}
	known := senders.DefaultKnownSenders()
	if o.Senders.SenderMap != "" {
		if known, err = known.WithFile(o.Senders.SenderMap); err != nil {
			return nil, usageError{fmt.Errorf("--sender-map: %w", err)}
		}
	}
	if s.imap, err = newIMAPIntake(o.IMAP, g.DataDir, db, s.resolver, log, reg); err != nil {
		return nil, err
	}
	s.views = &senders.Views{DB: db, Known: known, SPF: senders.NewSPFCache(s.resolver, 0), DMARC: s.resolver}
	s.senderWatch = &worker.SenderWatch{Store: db, Views: s.views, Log: log}
	s.rdns = senders.NewRDNSJob(db, s.resolver, senders.RDNSConfig{Rate: o.Senders.RDNSRate, Resolved: s.senderWatch.Resolved})
	// TLS reports over HTTPS (--public-url) reach the pipeline, made below.
	var tlsReports http.Handler
	if o.PublicURL != "" {
		if tlsReports, err = tlshttps.New(tlshttps.Config{
			Ingest: func(ctx context.Context, r io.Reader, d ingest.Arrival) (*ingest.Result, error) {
				return s.pipeline.Ingest(ctx, r, d)
			},
			Store: db, ReportingDomain: s.reportingDomain, RateLimit: o.TLSRPTRateLimit, Logger: log,
		}); err != nil {
			return nil, err
		}
	}
	views := s.views
	s.api = httpapi.New(httpapi.Config{
		Senders:         views,
		Store:           db,
		Quarantine:      s.pipeline,
		DNS:             &dnscheck.Checker{Resolver: s.resolver},
		ReportingDomain: s.reportingDomain,
		RateLimit:       o.RateLimit,
		Logger:          log,
		Metrics:         reg,
		Version:         version(),
		WebhookClient:   hooks,
		WebhookResolver: s.resolver,
		WebhookPolicy:   hookPolicy,
		Mailboxes:       s.imap.svc,
		// MTA-STS policy files are fetched under the webhook address policy.
		TLS:        &dnscheck.TLSChecker{Resolver: s.resolver, Fetcher: hooks.WithTimeout(dnscheck.MTASTSBudget)},
		TLSReports: tlsReports,
		PublicURL:  o.PublicURL,
		Ready: func() error {
			if !s.ready.Load() {
				return errors.New("starting")
			}
			return nil
		},
	})
	ui, err := web.New(web.Config{Store: db, DNS: &dnscheck.Checker{Resolver: s.resolver}, ReportingDomain: s.reportingDomain,
		PublicURL: o.PublicURL, Limiter: s.api, Webhooks: s.api, Domains: s.api, Logger: log, Senders: views,
		Mailboxes: s.imap.svc, GeoIPCity: o.Geo.City != "", GeoIPASN: o.Geo.ASN != ""})
	if err != nil {
		return nil, err
	}
	s.api.MountUI(ui)
	s.imap.attach(imapin.PipelineSink{Pipeline: s.pipeline, Metrics: s.imap.svc.Metrics}, o.IMAP.Interval)
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
		TLS:            tlsCfg,
		Logger:         log,
		Metrics:        reg,
	})
	if err != nil {
		return nil, err
	}
	s.apiSrv = &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    httpapi.HTTPServerMaxHeaderBytes, // a backstop: the API answers 431 in JSON above httpapi.MaxHeaderBytes
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	s.adminSrv = &http.Server{
		Handler:           admin.Handler(&admin.Local{DB: db, FlushKeyUsage: s.api.FlushKeyUsage, Pipeline: s.pipeline, Mailboxes: s.imap.svc, Views: views}, log),
		ReadHeaderTimeout: 10 * time.Second,
	}
	if s.sched, err = s.scheduleJobs(reg); err != nil {
		return nil, err
	}

	if s.lns, err = listen(g, o); err != nil {
		return nil, err
	}
	if err := bootstrap(db, g, s.lns.api.Addr().String(), log); err != nil {
		return nil, err
	}
	return s, nil
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

// scheduleJobs returns the scheduler with every job of serve: re-verification,
// DNS change detection, retention, webhook deliveries, the sender alerts and the flush of API
// key usage, and the metrics of every job's runs.
func (s *server) scheduleJobs(reg *metrics.Registry) (*worker.Scheduler, error) {
	o, db, log := s.o, s.db, s.log
	sched := worker.New(log, nil)
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
	reverify := &worker.Reverify{Store: db, Checker: &dnscheck.Checker{Resolver: s.resolver}, Log: log}
	sched.Add(worker.Job{Name: "reverify", Every: o.VerifyInterval, AtStart: true, Run: reverify.Run})
	sched.Add((&worker.DNSWatch{Store: db, Resolver: s.resolver, Interval: o.DNSCheckInterval, Log: log}).Job())
	sched.Add((&worker.Retention{Store: db, Retention: o.Retention, FailureRetention: o.FailureRetention,
		QuarantineRetention: o.QuarantineRetention, Log: log}).Job())
	deliverer, err := worker.NewDeliverer(worker.DeliverConfig{Store: db, Client: s.hooks, RetryDelays: o.Webhooks.RetryDelays,
		Concurrency: o.Webhooks.Concurrency, Logger: log, Metrics: reg})
	if err != nil {
		return nil, err
	}
	sched.Add(worker.Job{Name: "webhook-deliveries", Every: worker.DefaultDeliverEvery, AtStart: true, Run: deliverer.DeliverDue})
	sched.Add(s.senderWatch.Job())
	sched.Add(worker.Job{Name: "session-sweep", Every: time.Hour, Run: func(_ context.Context, now time.Time) error { _, err := db.SweepSessions(now); return err }})
	sched.Add(worker.Job{Name: "flush-key-usage", Every: time.Minute, Run: func(context.Context, time.Time) error {
		return s.api.FlushKeyUsage()
	}})
	return sched, nil
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
