package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

func newQuarantineCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "quarantine",
		Short: "List, show, retry and delete inputs that yielded no report",
		Long: `A mail or file that yields no usable DMARC report (no report part, XML
that cannot be read, a report for a domain no organization registered, a
report over the size limits) is not dropped: its bytes are kept in the
quarantine with the reason, up to 32 MiB per entry.

Look at an entry with 'show' (--raw writes the bytes kept), and 'retry' it
once the cause is fixed (for example after registering the domain): a retry
that yields a report stores it and removes the entry. 'delete' discards an
entry for good.

While 'dmarcd serve' runs these commands go through its admin socket;
otherwise they open the database file.`,
	}
	cmd.AddCommand(newQuarantineListCommand(g), newQuarantineShowCommand(g),
		newQuarantineRetryCommand(g), newQuarantineDeleteCommand(g))
	return cmd
}

type quarantineListOptions struct{ Page, Limit int }

func newQuarantineListCommand(g *globalOptions) *cobra.Command {
	var o quarantineListOptions
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List quarantine entries, newest first",
		Example: "  dmarcd quarantine list\n  dmarcd quarantine list --limit 200 --json",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runQuarantineList(cmd.Context(), g, o)
		},
	}
	cmd.Flags().IntVar(&o.Page, "page", 1, "page to show, from 1")
	cmd.Flags().IntVar(&o.Limit, "limit", 50, "entries per page")
	return cmd
}

func runQuarantineList(ctx context.Context, g *globalOptions, o quarantineListOptions) error {
	if o.Page < 1 || o.Limit < 1 || o.Limit > 1000 {
		return usagef("--page must be at least 1 and --limit between 1 and 1000")
	}
	svc, done, err := g.openIntake(ctx, geoOptions{}.config())
	if err != nil {
		return err
	}
	defer done()
	entries, total, err := svc.ListQuarantine(ctx, store.Page{Page: o.Page, Limit: o.Limit})
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []*store.QuarantineEntry{}
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"data": entries, "total": total})
	}
	if total == 0 {
		fmt.Fprintln(g.stdout, "The quarantine is empty.")
		return nil
	}
	tw := newTable(g.stdout, "ID", "RECEIVED", "SOURCE", "SIZE", "RETRIES", "NAME", "REASON")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", e.ID, e.ReceivedAt.UTC().Format(time.RFC3339), e.Source,
			e.Size, e.Retries, lastOf(oneLine(e.Name, 1000), 60), oneLine(e.Reason, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shown := (o.Page-1)*o.Limit + len(entries); shown < total || o.Page > 1 {
		fmt.Fprintf(g.stdout, "\nPage %d: entries %d-%d of %d (--page, --limit).\n", o.Page, shown-len(entries)+1, shown, total)
	}
	return nil
}

// oneLine keeps a table row on one line: control characters (a file name
// may hold a newline) become spaces, and long values are cut.
func oneLine(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// lastOf keeps the end of a long value, the file name of a path.
func lastOf(s string, max int) string {
	if r := []rune(s); len(r) > max {
		return "…" + string(r[len(r)-max+1:])
	}
	return s
}

type quarantineShowOptions struct{ Raw bool }

func newQuarantineShowCommand(g *globalOptions) *cobra.Command {
	var o quarantineShowOptions
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a quarantine entry; --raw writes the bytes kept",
		Long: `Show a quarantine entry. With --raw the bytes kept are written to standard
output, unchanged, and the entry is printed on standard error, so that
'dmarcd quarantine show ID --raw > input.eml' saves the input (to look at,
or to import again). With --json and --raw, the entry gets a field
raw_base64.`,
		Example: "  dmarcd quarantine show 01jd2m...\n  dmarcd quarantine show 01jd2m... --raw > message.eml",
		Args:    exactArgs(1, "the entry ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQuarantineShow(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().BoolVar(&o.Raw, "raw", false, "write the bytes kept to standard output")
	return cmd
}

func runQuarantineShow(ctx context.Context, g *globalOptions, o quarantineShowOptions, id string) error {
	svc, done, err := g.openIntake(ctx, geoOptions{}.config())
	if err != nil {
		return err
	}
	defer done()
	e, err := svc.FindQuarantine(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case g.JSON && o.Raw:
		var raw bytes.Buffer
		if _, err := svc.QuarantineRaw(ctx, id, &raw); err != nil {
			return err
		}
		return printJSON(g.stdout, struct {
			*store.QuarantineEntry
			RawBase64 []byte `json:"raw_base64"`
		}{e, raw.Bytes()})
	case g.JSON:
		return printJSON(g.stdout, e)
	case o.Raw:
		printEntry(g.stderr, e, orgName(ctx, svc, e.OrgID))
		_, err := svc.QuarantineRaw(ctx, id, g.stdout)
		return err
	}
	printEntry(g.stdout, e, orgName(ctx, svc, e.OrgID))
	return nil
}

// orgName is the name of organization id as the entry's owner is shown,
// "" when there is none or it cannot be read (the id is shown alone).
func orgName(ctx context.Context, svc admin.Service, id string) string {
	if id == "" {
		return ""
	}
	orgs, err := svc.ListOrganizations(ctx)
	if err != nil {
		return ""
	}
	for _, o := range orgs {
		if o.ID == id {
			return o.Name
		}
	}
	return ""
}

// printEntry prints e, and its organization's name when known.
func printEntry(w io.Writer, e *store.QuarantineEntry, org string) {
	fmt.Fprintf(w, "ID:           %s\n", e.ID)
	fmt.Fprintf(w, "Received:     %s\n", e.ReceivedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "Source:       %s\n", e.Source)
	fmt.Fprintf(w, "Name:         %s\n", oneLine(e.Name, 1000))
	switch {
	case e.OrgID != "" && org != "":
		fmt.Fprintf(w, "Organization: %s (%s)\n", oneLine(org, 200), e.OrgID)
	case e.OrgID != "":
		fmt.Fprintf(w, "Organization: %s\n", e.OrgID)
	}
	fmt.Fprintf(w, "Size:         %d bytes\n", e.Size)
	if e.Truncated {
		fmt.Fprintf(w, "Truncated:    only the header was kept (the quarantine was near --quarantine-max-bytes)\n")
	}
	fmt.Fprintf(w, "Retries:      %d\n", e.Retries)
	fmt.Fprintf(w, "Reason:       %s\n", oneLine(e.Reason, 1000))
}

func newQuarantineRetryCommand(g *globalOptions) *cobra.Command {
	var geoOpts geoOptions
	var ret retentionOptions
	var all bool
	cmd := &cobra.Command{
		Use:   "retry ID | --all",
		Short: "Ingest quarantine entries again; each is removed once it yields a report",
		Long: `Run the bytes kept for an entry through the ingest pipeline again, for
example after registering the domain its report is for. When they now yield
a report, it is stored (or found a duplicate) and the entry is removed;
otherwise the entry stays, with the new reason and one more retry counted.
A report older than the retention window is not stored: its entry stays,
saying so.

With --all every entry is retried, oldest first, one line each, then a
count of those removed and those that stay. Exit codes: for one ID, 1 when
the entry stays; with --all, 1 only when a retry failed (entries that stay
are no failure).`,
		Example: "  dmarcd quarantine retry 01jd2m...\n  dmarcd quarantine retry --all",
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case all && len(args) > 0:
				return usagef("give an entry ID or --all, not both")
			case !all && len(args) != 1:
				return usagef("expected the entry ID, or --all")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ret.changed(cmd)
			if all {
				return runQuarantineRetryAll(cmd.Context(), g, geoOpts, ret)
			}
			return runQuarantineRetry(cmd.Context(), g, geoOpts, ret, args[0])
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "retry every entry")
	geoOpts.AddFlags(cmd, "(only used when no server runs)")
	ret.AddFlags(cmd)
	return cmd
}

// openRetrying opens the intake for retries with the retention windows of
// ret (a running server's own; another value given is refused).
func (g *globalOptions) openRetrying(ctx context.Context, geoOpts geoOptions, ret retentionOptions) (admin.Service, func(), error) {
	svc, done, err := g.openIntakeWith(ctx, geoOpts.config(), ret.apply)
	if err != nil {
		return nil, nil, err
	}
	if err := checkServerRetention(ctx, svc, ret); err != nil {
		done()
		return nil, nil, err
	}
	return svc, done, nil
}

// runQuarantineRetryAll retries every entry: their ids are listed first,
// since each retry that stores its report removes its entry.
func runQuarantineRetryAll(ctx context.Context, g *globalOptions, geoOpts geoOptions, ret retentionOptions) error {
	svc, done, err := g.openRetrying(ctx, geoOpts, ret)
	if err != nil {
		return err
	}
	defer done()
	var ids []string
	for page := 1; ; page++ {
		entries, total, err := svc.ListQuarantine(ctx, store.Page{Page: page, Limit: 1000})
		if err != nil {
			return err
		}
		for _, e := range entries {
			ids = append(ids, e.ID)
		}
		if len(entries) == 0 || len(ids) >= total {
			break
		}
	}
	slices.Reverse(ids) // oldest first
	type outcome struct {
		ID     string         `json:"id"`
		Result *ingest.Result `json:"result,omitempty"`
		Error  string         `json:"error,omitempty"`
	}
	var outs []outcome
	removed, stayed, failed := 0, 0, 0
	for _, id := range ids {
		res, err := svc.RetryQuarantine(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // deleted meanwhile
		case err != nil:
			if ctx.Err() != nil {
				return err
			}
			failed++
			outs = append(outs, outcome{ID: id, Error: err.Error()})
			if !g.JSON {
				fmt.Fprintf(g.stdout, "failed       %s: %v\n", id, err)
			}
			continue
		}
		outs = append(outs, outcome{ID: id, Result: res})
		if res.Quarantined != "" {
			stayed++
		} else {
			removed++
		}
		if !g.JSON {
			fmt.Fprintln(g.stdout, retryLine(id, res))
		}
	}
	if g.JSON {
		if outs == nil {
			outs = []outcome{}
		}
		if err := printJSON(g.stdout, map[string]any{"retried": outs, "removed": removed, "stayed": stayed, "failed": failed}); err != nil {
			return err
		}
	} else {
		n := removed + stayed + failed
		what := "entries"
		if n == 1 {
			what = "entry"
		}
		fmt.Fprintf(g.stdout, "\nRetried %d %s: %d removed (their reports stored or already there), %d stay quarantined, %d failed.\n",
			n, what, removed, stayed, failed)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d retries failed", failed, removed+stayed+failed)
	}
	return nil
}

// retryLine is the line of one entry retried by --all.
func retryLine(id string, res *ingest.Result) string {
	if res.Quarantined != "" {
		return fmt.Sprintf("stays        %s: %s", id, oneLine(res.Reason, 300))
	}
	stored, dups := 0, 0
	for _, o := range res.Reports {
		if o.Duplicate {
			dups++
		} else {
			stored++
		}
	}
	return fmt.Sprintf("removed      %s (%d stored, %d already there)", id, stored, dups)
}

func runQuarantineRetry(ctx context.Context, g *globalOptions, geoOpts geoOptions, ret retentionOptions, id string) error {
	svc, done, err := g.openRetrying(ctx, geoOpts, ret)
	if err != nil {
		return err
	}
	defer done()
	res, err := svc.RetryQuarantine(ctx, id)
	if err != nil {
		return err
	}
	if g.JSON {
		if err := printJSON(g.stdout, res); err != nil {
			return err
		}
		return stillQuarantined(id, res)
	}
	for _, o := range res.Reports {
		if o.DifferentContent {
			fmt.Fprintf(g.stdout, "Duplicate with different content of report %s (%s): the same reporter, report id and domain, other dates, records or messages; not stored, the first copy is kept.\n", o.ReportID, o.Domain)
		} else if o.Duplicate {
			fmt.Fprintf(g.stdout, "Duplicate of report %s (%s), not stored again.\n", o.ReportID, o.Domain)
		} else {
			fmt.Fprintf(g.stdout, "Stored report %s for %s (%s).\n", o.ReportID, o.Domain, plural(o.Records, "record"))
		}
	}
	if res.Quarantined == "" {
		fmt.Fprintf(g.stdout, "Quarantine entry %s removed.\n", id)
	}
	return stillQuarantined(id, res)
}

// stillQuarantined is the error (exit 1) of a retry whose entry stays.
func stillQuarantined(id string, res *ingest.Result) error {
	if res.Quarantined == "" {
		return nil
	}
	return fmt.Errorf("quarantine entry %s stays quarantined: %s", res.Quarantined, res.Reason)
}

func newQuarantineDeleteCommand(g *globalOptions) *cobra.Command {
	var all bool
	var olderThan time.Duration
	cmd := &cobra.Command{
		Use:   "delete ID | --all | --older-than DURATION",
		Short: "Delete quarantine entries and their bytes for good",
		Example: `  dmarcd quarantine delete 01jd2m...
  dmarcd quarantine delete --older-than 7d
  dmarcd quarantine delete --all`,
		Args: func(cmd *cobra.Command, args []string) error {
			bulk := all || cmd.Flags().Changed("older-than")
			switch {
			case all && cmd.Flags().Changed("older-than"):
				return usagef("--all and --older-than do not go together")
			case bulk && len(args) > 0:
				return usagef("give an entry ID or --all or --older-than, not both")
			case !bulk && len(args) != 1:
				return usagef("expected the entry ID, or --all or --older-than DURATION")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case all:
				return runQuarantineDeleteBefore(cmd.Context(), g, time.Now().Add(24*time.Hour))
			case cmd.Flags().Changed("older-than"):
				return runQuarantineDeleteBefore(cmd.Context(), g, time.Now().Add(-olderThan))
			}
			return runQuarantineDelete(cmd.Context(), g, args[0])
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "delete every entry")
	durationVar(cmd.Flags(), &olderThan, "older-than", 0, "delete the entries received longer ago than this (30d, 12h)")
	return cmd
}

func runQuarantineDeleteBefore(ctx context.Context, g *globalOptions, before time.Time) error {
	svc, done, err := g.openIntake(ctx, geoOptions{}.config())
	if err != nil {
		return err
	}
	defer done()
	n, err := svc.DeleteQuarantineBefore(ctx, before)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"deleted": n})
	}
	what := "entries"
	if n == 1 {
		what = "entry"
	}
	fmt.Fprintf(g.stdout, "Deleted %d quarantine %s.\n", n, what)
	return nil
}

func runQuarantineDelete(ctx context.Context, g *globalOptions, id string) error {
	svc, done, err := g.openIntake(ctx, geoOptions{}.config())
	if err != nil {
		return err
	}
	defer done()
	if err := svc.DeleteQuarantine(ctx, id); err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"id": id, "deleted": true})
	}
	fmt.Fprintf(g.stdout, "Deleted quarantine entry %s.\n", id)
	return nil
}
