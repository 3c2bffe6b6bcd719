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
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
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
}

func newServeCommand(g *globalOptions) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the dmarcd service: REST API, admin socket and scheduler",
		Long: `Run dmarcd: the REST API on --listen, the admin socket <data-dir>/dmarcd.sock
(mode 0600, used by the other commands while the server runs) and the
scheduler. It stops gracefully on SIGINT or SIGTERM.

On an empty database it creates the organization "default" (plan
unlimited) and one API key with full scope, and prints that key once.

Every flag can also be set with an environment variable DMARCD_<FLAG>:
upper case, dashes as underscores, lists comma-separated, e.g.
DMARCD_LISTEN=0.0.0.0:8080 or DMARCD_DNS_SERVER=1.1.1.1:53,8.8.8.8:53.
A flag given on the command line wins over the environment.

Endpoints without a key: /healthz (up), /readyz (database open and
listeners serving), /metrics (Prometheus) and /api/v1/openapi.json.`,
		Example: `  dmarcd serve
  dmarcd serve --data-dir /var/lib/dmarcd --listen 0.0.0.0:8080 --reporting-domain reports.example.net
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
	if o.RateLimit < 1 {
		return usagef("--rate-limit must be at least 1")
	}
	reportingDomain, err := resolveReportingDomain(o.ReportingDomain, log)
	if err != nil {
		return err
	}
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
	reg := metrics.NewRegistry()
	var ready atomic.Bool
	api := httpapi.New(httpapi.Config{
		Store:           db,
		DNS:             &dnscheck.Checker{Resolver: resolver},
		ReportingDomain: reportingDomain,
		RateLimit:       o.RateLimit,
		Logger:          log,
		Metrics:         reg,
		Version:         version(),
		Ready: func() error {
			if !ready.Load() {
				return errors.New("starting")
			}
			return nil
		},
	})

	apiLn, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	adminLn, err := admin.Listen(g.socketPath())
	if err != nil {
		apiLn.Close()
		return err
	}
	defer os.Remove(g.socketPath())
	if err := bootstrap(db, g, apiLn.Addr().String(), log); err != nil {
		apiLn.Close()
		adminLn.Close()
		return err
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
		Handler:           admin.Handler(&admin.Local{DB: db, FlushKeyUsage: api.FlushKeyUsage}, log),
		ReadHeaderTimeout: 10 * time.Second,
	}
	sched := worker.New(log, nil)
	sched.Add(worker.Job{Name: "flush-key-usage", Every: time.Minute, Run: func(context.Context, time.Time) error {
		return api.FlushKeyUsage()
	}})

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	serve := func(name string, srv *http.Server, ln net.Listener) {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("%s server: %w", name, err)
		}
	}
	wg.Add(3)
	go serve("API", apiSrv, apiLn)
	go serve("admin", adminSrv, adminLn)
	go func() { defer wg.Done(); sched.Run(runCtx) }()
	ready.Store(true)
	log.Info("dmarcd started", "version", version(), "api", apiLn.Addr().String(),
		"admin_socket", g.socketPath(), "data_dir", g.DataDir, "reporting_domain", reportingDomain,
		"dns_servers", strings.Join(resolver.Servers(), ","), "rate_limit", o.RateLimit)

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
	wg.Wait()
	if err := api.FlushKeyUsage(); err != nil {
		log.Error("flushing API key usage", "error", err)
	}
	log.Info("dmarcd stopped")
	return runErr
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
