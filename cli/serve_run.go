package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/dmarcd/dmarcd/geo"
)

// runServe is 'dmarcd serve': build, run until ctx ends, release.
func runServe(ctx context.Context, g *globalOptions, o serveOptions) error {
	s, err := newServer(g, o)
	if err != nil {
		return err
	}
	defer s.close()
	return s.run(ctx)
}

// run starts the components and stops them when ctx ends or one of them
// fails; the start and shutdown order is here and nowhere else. Start: the
// pipeline (every server hands it work), the demo reports, the API, admin
// and SMTP servers, the scheduler, the mailbox poller and SIGHUP reloads,
// then ready. Stop: not ready, the scheduler, the mailbox poller and SIGHUP
// reloads; the servers drain (up to
// --shutdown-timeout); then the pipeline commits what it was handed, and
// API key usage is flushed. The error is the failure that stopped it.
func (s *server) run(ctx context.Context) error {
	g, o, log, lns, pipeline := s.g, s.o, s.log, s.lns, s.pipeline

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
		loadDemo(ctx, s.db, pipeline.Ingest, s.reportingDomain, log)
	}

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
	go serve("API", s.apiSrv, lns.api)
	go serve("admin", s.adminSrv, lns.admin)
	go func() { defer wg.Done(); s.sched.Run(runCtx) }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.rdns.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			log.Warn("reverse DNS job stopped", "error", err)
		}
	}()
	smtpAddr := ""
	if lns.smtp != nil {
		smtpAddr = lns.smtp.Addr().String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.smtp.Serve(lns.smtp); err != nil {
				errc <- fmt.Errorf("SMTP server: %w", err)
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.runExport(runCtx) }()
	// The mailbox poller stops with the servers, before the pipeline.
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.imap.manager.Run(runCtx) }()
	reloadGeoOnHUP(runCtx, s.geo, log, &wg)
	s.ready.Store(true)
	log.Info("dmarcd started", "version", version(), "api", lns.api.Addr().String(), "smtp", smtpAddr,
		"smtp_starttls", s.smtpTLS != nil, "admin_socket", g.socketPath(), "data_dir", g.DataDir,
		"reporting_domain", s.reportingDomain, "dns_servers", strings.Join(s.resolver.Servers(), ","),
		"rate_limit", o.RateLimit, "trusted_proxies", o.proxies.String(), "geo", s.geo.Description())
	// The first key last, below the demo's and the start's log lines.
	if err := s.firstKey.announce(g, lns.api.Addr().String(), o.PublicURL, o.Demo); err != nil {
		log.Error("printing the first API key's text", "error", err)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case runErr = <-errc:
		log.Error("server failed, shutting down", "error", runErr)
	}
	s.ready.Store(false)
	stop()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	if err := s.apiSrv.Shutdown(shutCtx); err != nil {
		log.Warn("API shutdown", "error", err)
	}
	if err := s.adminSrv.Shutdown(shutCtx); err != nil {
		log.Warn("admin socket shutdown", "error", err)
	}
	if lns.smtp != nil {
		if err := s.smtp.Shutdown(shutCtx); err != nil {
			log.Warn("SMTP shutdown", "error", err)
		}
	}
	wg.Wait()
	stopPipeline()
	<-pipeDone
	if err := s.app.FlushKeyUsage(); err != nil {
		log.Error("flushing API key usage", "error", err)
	}
	log.Info("dmarcd stopped")
	return runErr
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
