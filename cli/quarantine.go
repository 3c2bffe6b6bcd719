package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	cmd := &cobra.Command{
		Use:   "retry ID",
		Short: "Ingest a quarantine entry again; it is removed once it yields a report",
		Long: `Run the bytes kept for an entry through the ingest pipeline again, for
example after registering the domain its report is for. When they now yield
a report, it is stored (or found a duplicate) and the entry is removed;
otherwise the entry stays, with the new reason and one more retry counted.`,
		Example: "  dmarcd quarantine retry 01jd2m...",
		Args:    exactArgs(1, "the entry ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQuarantineRetry(cmd.Context(), g, geoOpts, args[0])
		},
	}
	geoOpts.AddFlags(cmd, "(only used when no server runs)")
	return cmd
}

func runQuarantineRetry(ctx context.Context, g *globalOptions, geoOpts geoOptions, id string) error {
	svc, done, err := g.openIntake(ctx, geoOpts.config())
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
		if o.Duplicate {
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
