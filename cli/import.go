package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/internal/duration"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/worker"
)

// geoOptions are the geolocation databases of a command that may run the
// ingest pipeline itself (no server running).
type geoOptions struct {
	City, ASN string
}

func (o *geoOptions) AddFlags(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&o.City, "geoip-city", "", "MaxMind-format City or Country database (.mmdb) "+what)
	cmd.Flags().StringVar(&o.ASN, "geoip-asn", "", "MaxMind-format ASN or ISP database (.mmdb) "+what)
}

func (o geoOptions) config() geo.Config { return geo.Config{CityPath: o.City, ASNPath: o.ASN} }

// openIntake returns the admin service for intake operations: the running
// server's socket when one answers (its pipeline, geolocation and limits
// apply), else a pipeline run by this process over the database file.
// close stops that pipeline after flushing it, and releases everything.
func (g *globalOptions) openIntake(ctx context.Context, geoCfg geo.Config) (svc admin.Service, close func(), err error) {
	return g.openIntakeWith(ctx, geoCfg, nil)
}

// openIntakeWith is openIntake whose own pipeline (no server running) gets
// its Config changed by tweak, when not nil.
func (g *globalOptions) openIntakeWith(ctx context.Context, geoCfg geo.Config, tweak func(*ingest.Config)) (svc admin.Service, close func(), err error) {
	if c, ok, err := g.dialAdmin(ctx); err != nil {
		return nil, nil, err
	} else if ok {
		return c, c.Close, nil
	}
	if err := g.requireDatabase(); err != nil {
		return nil, nil, err
	}
	geoDB, err := geo.Open(geoCfg)
	if err != nil {
		return nil, nil, err
	}
	db, err := g.openStore(false)
	if err != nil {
		geoDB.Close()
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := ingest.Config{Store: db, Geo: geoDB, Logger: log}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := ingest.New(cfg)
	if err != nil {
		db.Close()
		geoDB.Close()
		return nil, nil, err
	}
	// The pipeline outlives an interrupted command long enough to flush
	// what its callers already handed it.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	return &admin.Local{DB: db, Pipeline: p}, func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			log.Error("ingest pipeline", "error", err)
		}
		db.Close()
		geoDB.Close()
	}, nil
}

type importOptions struct {
	Org  string
	Jobs int
	// HandOver sends the files open to a running server even when it
	// could read them itself.
	HandOver bool
	Geo      geoOptions
	Ret      retentionOptions
}

// retentionOptions are the age rule of what import and quarantine retry
// store: Retention and FailureRetention apply when no server runs (reports
// older are not stored). A running server applies its own; given
// (RetentionSet, FailureRetentionSet) and other than the server's, the
// command is refused.
type retentionOptions struct {
	Retention, FailureRetention       time.Duration
	RetentionSet, FailureRetentionSet bool
}

// AddFlags adds --retention and --failure-retention.
func (o *retentionOptions) AddFlags(cmd *cobra.Command) {
	durationVar(cmd.Flags(), &o.Retention, "retention", worker.DefaultRetention, "do not store aggregate reports that ended longer ago, as serve's --retention would delete them (0 keeps all; with a server running, its own applies: another value is refused)")
	durationVar(cmd.Flags(), &o.FailureRetention, "failure-retention", 90*24*time.Hour, "do not store failure reports that arrived longer ago (0 keeps all; with a server running, its own applies: another value is refused)")
}

// changed notes which of the flags the command line gave.
func (o *retentionOptions) changed(cmd *cobra.Command) {
	o.RetentionSet, o.FailureRetentionSet = cmd.Flags().Changed("retention"), cmd.Flags().Changed("failure-retention")
}

// apply sets the windows on the pipeline of a command with no server.
func (o retentionOptions) apply(c *ingest.Config) {
	c.Retention, c.FailureRetention = o.Retention, o.FailureRetention
}

func newImportCommand(g *globalOptions) *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import [--org ORG] PATH...",
		Short: "Import DMARC aggregate and failure reports and SMTP TLS reports from files, folders and mbox files",
		Long: `Import DMARC aggregate reports, failure (forensic, RFC 6591 ARF) reports
and SMTP TLS reports (RFC 8460). Each PATH is a file or a folder (read
recursively, in name order; names starting with a dot are skipped, symbolic
links to folders are not followed). A file may be a report (.xml, .xml.gz,
.gz, .zip, a TLS report's .json or .json.gz, whatever its name: the content
decides), a mail (.eml), or an mbox file, which is split into its messages
("From " lines, mboxrd quoting undone); each message counts as one input,
named FILE#N. A mail holding a failure report (an ARF feedback report, or a
plain-text failure notice) is stored as a failure report of its domain, for
plans that include them. In a folder, files that are plainly no report by
their names (README, LICENSE, CHANGELOG, *.md, pictures, code) are left
out with a note, not quarantined; a file named by itself is always read.
Progress lines come in the order of the names given.

Each report goes to the registered domain of its policy_published domain
(exact name, then its organizational domain); --org restricts that lookup to
one organization, which is needed when several organizations registered the
same name. A report seen before (same reporter, report id and domain) is
counted as a duplicate and not stored again, so an import can be re-run.
An input without a usable report is kept in the quarantine ('dmarcd
quarantine list') with the reason.

While 'dmarcd serve' runs, the server stores the inputs (its --geoip-*
databases and limits apply), through the admin socket. When this command
runs as the server's user and the server sees the same files at the
paths given, the server reads them itself, as an offline import would,
and tells each outcome here. Otherwise (root importing into a server that
runs as dmarcd, a server with a private /tmp or a protected home, or
--hand-over) the files are opened here and handed to the server open
(messages of an mbox go as their bytes): the server never needs the right
to open them. With no server running, this command opens the database
file itself; --geoip-city and --geoip-asn then add geolocation.

On a terminal a progress bar is shown, otherwise one line per input. The
summary counts reports imported, duplicates, inputs quarantined and inputs
failed, and lists each failure with its file and reason. The exit code is 1
when any input failed, 0 otherwise (quarantined inputs are not failures).`,
		Example: `  dmarcd import ~/dmarc-reports/
  dmarcd import --org acme "reports (2024)/google.com!acme.com!1700000000!1700086399.xml.gz"
  dmarcd import ~/Mail/dmarc.mbox --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("expected at least one PATH")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Ret.changed(cmd)
			return runImport(cmd.Context(), g, o, args)
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "only match domains of this organization (name or id)")
	cmd.Flags().IntVar(&o.Jobs, "jobs", imports.DefaultJobs, "inputs in flight at once (each waits for its commit; more share a commit)")
	cmd.Flags().BoolVar(&o.HandOver, "hand-over", false, "with a server running, open the files here and hand them over open, even when the server could read them itself")
	o.Geo.AddFlags(cmd, "(only used when no server runs)")
	o.Ret.AddFlags(cmd)
	return cmd
}

func runImport(ctx context.Context, g *globalOptions, o importOptions, paths []string) error {
	if o.Jobs < 1 || o.Jobs > imports.MaxJobs {
		return usagef("--jobs must be between 1 and %d", imports.MaxJobs)
	}
	svc, done, err := g.openIntakeWith(ctx, o.Geo.config(), o.Ret.apply)
	if err != nil {
		return err
	}
	defer done()
	if err := checkServerRetention(ctx, svc, o.Ret); err != nil {
		return err
	}
	orgID := ""
	if o.Org != "" {
		org, err := findOrg(ctx, svc, o.Org)
		if err != nil {
			return err
		}
		orgID = org.ID
	}
	pr := newImportProgress(g.stdout, g.JSON)
	sum, err := svc.Import(ctx, admin.ImportRequest{Paths: paths, Org: orgID, Jobs: o.Jobs, HandOver: o.HandOver, Progress: pr.update})
	return importDone(g, pr, sum, err)
}

// checkServerRetention refuses an import whose --retention or
// --failure-retention differs from the running server's, which stores the
// inputs with its own: the import would otherwise not do what was asked.
// (With no server, svc's pipeline has the windows given.)
func checkServerRetention(ctx context.Context, c admin.Service, o retentionOptions) error {
	if !o.RetentionSet && !o.FailureRetentionSet {
		return nil
	}
	ret, err := c.IngestRetention(ctx)
	if err != nil {
		return fmt.Errorf("the running server stores the inputs with its own retention, and did not say which (%w): "+
			"import without --retention and --failure-retention, or stop the server", err)
	}
	for _, f := range []struct {
		set           bool
		name          string
		asked, theirs time.Duration
	}{{o.RetentionSet, "--retention", o.Retention, ret.Aggregate}, {o.FailureRetentionSet, "--failure-retention", o.FailureRetention, ret.Failure}} {
		if f.set && f.asked != f.theirs {
			return usagef("the running server stores the inputs and applies its own %s %s, not %s: "+
				"import without %s (or with the server's value), or stop the server to import with another",
				f.name, duration.Format(f.theirs), duration.Format(f.asked), f.name)
		}
	}
	return nil
}

// importDone shows the end of an import: the summary, and the error that
// makes the exit code.
func importDone(g *globalOptions, pr *importProgress, sum *imports.Summary, err error) error {
	pr.finish(sum)
	if sum != nil {
		if g.JSON {
			if perr := printJSON(g.stdout, sum); perr != nil {
				return perr
			}
		} else {
			printImportSummary(g.stdout, sum, pr.bar)
		}
	}
	var stopped *imports.StoppedError
	if errors.As(err, &stopped) {
		return fmt.Errorf("the server went away after %s of %s were imported (%s): what was imported is stored; "+
			"run the same import again when the server is back: inputs already stored are found as duplicates, not stored twice",
			plural(sum.Inputs, "input"), plural(sum.Files, "file"), stopped.Cause)
	}
	if err != nil {
		return err
	}
	if sum.Failed > 0 {
		return fmt.Errorf("%d of %d inputs failed", sum.Failed, sum.Inputs)
	}
	return nil
}

// findOrg resolves ORG (an id in any case, or a name in any case) as the
// store does, before any input is sent, so that a typo fails at once.
func findOrg(ctx context.Context, svc admin.Service, ref string) (*store.Organization, error) {
	orgs, err := svc.ListOrganizations(ctx)
	if err != nil {
		return nil, err
	}
	ref = strings.TrimSpace(ref)
	for _, org := range orgs {
		if strings.EqualFold(org.ID, ref) {
			return org, nil
		}
	}
	for _, org := range orgs {
		if strings.EqualFold(org.Name, ref) {
			return org, nil
		}
	}
	return nil, &store.Error{Kind: store.ErrNotFound, Msg: fmt.Sprintf("organization %q not found", ref)}
}

// importProgress shows an import as it runs: a bar redrawn in place on a
// terminal, one line per input otherwise, nothing with --json.
type importProgress struct {
	w     io.Writer
	bar   bool
	quiet bool
	drawn time.Time
}

func newImportProgress(w io.Writer, jsonOut bool) *importProgress {
	return &importProgress{w: w, bar: isTerminal(w), quiet: jsonOut}
}

func (p *importProgress) update(it imports.Item, s *imports.Summary) {
	switch {
	case p.quiet:
	case p.bar:
		// Redrawing at most ten times a second keeps a fast import from
		// spending its time on the terminal.
		if now := time.Now(); now.Sub(p.drawn) >= 100*time.Millisecond || s.FilesDone == s.Files {
			p.drawn = now
			p.draw(s)
		}
	default:
		fmt.Fprintln(p.w, itemLine(it))
	}
}

func (p *importProgress) draw(s *imports.Summary) {
	const width = 30
	frac := 1.0
	if s.Files > 0 {
		frac = float64(s.FilesDone) / float64(s.Files)
	}
	n := int(frac * width)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
	fmt.Fprintf(p.w, "\r[%s] %3.0f%% %d/%d files  %d imported, %d duplicates, %d quarantined, %d failed\x1b[K",
		bar, frac*100, s.FilesDone, s.Files, s.Imported, s.Duplicates, s.Quarantined, s.Failed)
}

func (p *importProgress) finish(s *imports.Summary) {
	if p.bar && !p.quiet && s != nil {
		p.draw(s)
		fmt.Fprintln(p.w)
	}
}

// itemLine is the plain-output line of one input.
func itemLine(it imports.Item) string {
	if it.Err != nil {
		return fmt.Sprintf("failed       %s: %s", it.Name, it.Err)
	}
	var stored, dups, differ, records int
	for _, o := range it.Result.Reports {
		switch {
		case o.DifferentContent:
			differ++
		case o.Duplicate:
			dups++
		default:
			stored++
			records += o.Records
		}
	}
	var parts []string
	if stored > 0 {
		parts = append(parts, plural(stored, "report")+", "+plural(records, "record"))
	}
	if dups > 0 {
		parts = append(parts, plural(dups, "duplicate"))
	}
	if differ > 0 {
		parts = append(parts, plural(differ, "duplicate")+" with different content, not stored")
	}
	if it.Result.RecordsSkipped > 0 {
		parts = append(parts, plural(it.Result.RecordsSkipped, "record")+" skipped")
	}
	if n := len(it.Result.Expired); n > 0 {
		parts = append(parts, plural(n, "report")+" older than the retention window ("+it.Result.Expired[0].Window+"), not stored")
	}
	detail := strings.Join(parts, ", ")
	switch {
	case it.Result.Quarantined != "":
		line := fmt.Sprintf("quarantined  %s: %s (id %s)", it.Name, it.Result.Reason, it.Result.Quarantined)
		if detail != "" {
			line += "; also " + detail
		}
		return line
	case stored > 0:
		return fmt.Sprintf("imported     %s (%s)", it.Name, detail)
	case differ > 0:
		return fmt.Sprintf("differs      %s (%s)", it.Name, detail)
	case dups > 0:
		return fmt.Sprintf("duplicate    %s (%s)", it.Name, detail)
	case len(it.Result.Expired) > 0:
		return fmt.Sprintf("too old      %s (%s)", it.Name, detail)
	default:
		return fmt.Sprintf("no report    %s", it.Name)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// printImportSummary ends an import: the counts, the quarantined inputs
// when no per-input lines named them already, and every failure.
func printImportSummary(w io.Writer, s *imports.Summary, listQuarantine bool) {
	failures := ""
	if s.FailureReports > 0 {
		failures = " and " + plural(s.FailureReports, "failure report")
	}
	if s.TLSReports > 0 {
		failures += " and " + plural(s.TLSReports, "TLS report")
	}
	fmt.Fprintf(w, "\nImported %s (%s)%s from %s; %s, %d quarantined, %d failed.\n",
		plural(s.Imported, "aggregate report"), plural(s.Records, "record"), failures, plural(s.Inputs, "input"),
		plural(s.Duplicates, "duplicate"), s.Quarantined, s.Failed)
	if s.DifferentContent > 0 {
		fmt.Fprintf(w, "Not stored: %s with different content: a report stored before has the same reporter, report id and domain, and other dates, records or messages (the first copy is kept; the log names them).\n",
			plural(s.DifferentContent, "duplicate"))
	}
	if s.Expired > 0 {
		fmt.Fprintf(w, "Not stored: %s older than the retention window (%s); --retention to keep them (0 keeps all):\n",
			plural(s.Expired, "report"), s.ExpiredReports[0].Window)
		for i, x := range s.ExpiredReports {
			if i == 20 {
				fmt.Fprintf(w, "  ... and %d more (--json lists them all)\n", len(s.ExpiredReports)-i)
				break
			}
			id := ""
			if x.ReportID != "" {
				id = " " + x.ReportID
			}
			from := "from " + x.Reporter
			if strings.TrimSpace(x.Reporter) == "" {
				from = "by an unnamed reporter"
			}
			fmt.Fprintf(w, "  %s: %s report%s %s for %s, %s\n", x.File, x.Kind, id, from, x.Domain, x.Date.Format("2006-01-02"))
		}
	}
	if s.RecordsSkipped > 0 {
		fmt.Fprintf(w, "%s skipped as unusable (an empty or invalid source IP or count); the log names them.\n",
			plural(s.RecordsSkipped, "record"))
	}
	if len(s.Quarantine) > 0 && listQuarantine {
		fmt.Fprintln(w, "\nQuarantined (see 'dmarcd quarantine show ID'):")
		for _, q := range s.Quarantine {
			fmt.Fprintf(w, "  %s: %s (id %s)\n", q.File, q.Reason, q.ID)
		}
	} else if len(s.Quarantine) > 0 {
		fmt.Fprintln(w, "Quarantined inputs are kept with their reason: see 'dmarcd quarantine list'.")
	}
	if len(s.Skipped) > 0 {
		fmt.Fprintf(w, "Skipped %s that are no report by their names (not read, not quarantined):\n", plural(len(s.Skipped), "file"))
		for i, sk := range s.Skipped {
			if i == 20 {
				fmt.Fprintf(w, "  ... and %d more (--json lists them all)\n", len(s.Skipped)-i)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", sk.File, sk.Reason)
		}
	}
	if len(s.Failures) > 0 {
		fmt.Fprintln(w, "\nFailed:")
		for _, f := range s.Failures {
			fmt.Fprintf(w, "  %s: %s\n", f.File, f.Reason)
		}
	}
}
