package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
)

func newExportCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Show the ClickHouse export and re-export history",
		Long: `With 'dmarcd serve --export-clickhouse URL' every stored report is streamed
into ClickHouse from a cursor kept in dmarcd's database (docs/clickhouse.md).
'export status' shows the cursor, the lag, the rows exported and the last
error; 'export clickhouse --since DATE' exports the reports stored since
DATE again (rows replayed replace themselves).`,
	}
	cmd.AddCommand(newExportStatusCommand(g), newExportClickHouseCommand(g))
	return cmd
}

func newExportStatusCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the ClickHouse export's cursor, lag, rows and last error",
		Long: `Shows the ClickHouse export: through the running server's socket its
sink's state (URL without the password, cursor, lag, rows exported, last
error), else the cursor stored in the file. --json for scripts.`,
		Example: `  dmarcd export status
  dmarcd export status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			svc, done, err := g.openAdmin(ctx)
			if err != nil {
				return err
			}
			defer done()
			st, err := svc.ExportStatus(ctx)
			if err != nil {
				return err
			}
			return printExportStatus(g, st)
		},
	}
}

func newExportClickHouseCommand(g *globalOptions) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "clickhouse --since DATE",
		Short: "Export again the reports stored since DATE (a backfill)",
		Long: `Moves the ClickHouse export's cursor back to the reports dmarcd stored since
DATE (YYYY-MM-DD, UTC, or an RFC 3339 time): the running server exports
them again at once; without a running server the next 'serve
--export-clickhouse' does. Rows sent again replace themselves
(ReplacingMergeTree), so a backfill never doubles a count after FINAL.`,
		Example: `  dmarcd export clickhouse --since 2026-01-01
  dmarcd export status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runExportSince(cmd.Context(), g, since)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "export again the reports stored since this day (YYYY-MM-DD, UTC) or time (RFC 3339)")
	_ = cmd.MarkFlagRequired("since")
	return cmd
}

func runExportSince(ctx context.Context, g *globalOptions, raw string) error {
	since, err := time.Parse("2006-01-02", raw)
	if err != nil {
		if since, err = time.Parse(time.RFC3339, raw); err != nil {
			return usagef("--since %q: want YYYY-MM-DD or an RFC 3339 time", raw)
		}
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	st, err := svc.ExportSince(ctx, since)
	if err != nil {
		return err
	}
	if !g.JSON {
		fmt.Fprintf(g.stdout, "Export cursor moved back to the reports stored since %s.\n", since.UTC().Format(time.RFC3339))
		if !st.Running {
			fmt.Fprintln(g.stdout, "No server exports now: the next 'dmarcd serve --export-clickhouse URL' will.")
		}
	}
	return printExportStatus(g, st)
}

func printExportStatus(g *globalOptions, st *admin.ExportStatus) error {
	if g.JSON {
		return printJSON(g.stdout, st)
	}
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	if st.Running {
		row("export", st.Sink.URL)
	} else {
		row("export", "not running (no server with --export-clickhouse)")
	}
	for _, c := range []struct{ k, v string }{{"cursor aggregate", st.Cursor.Aggregate}, {"cursor failure", st.Cursor.Failure}, {"cursor tls", st.Cursor.TLS}} {
		row(c.k, orNone(c.v))
	}
	row("rows (cursor)", st.Cursor.Rows)
	if s := st.Sink; s != nil {
		row("lag", (time.Duration(s.LagSeconds * float64(time.Second))).Round(time.Second))
		row("rows (this run)", s.Rows)
		row("server version", orNone(s.ServerVersion))
		if !s.LastExportAt.IsZero() {
			row("last export", s.LastExportAt.Format(time.RFC3339))
		}
		row("errors", s.Errors)
		if s.LastError != "" {
			row("last error", s.LastErrorAt.Format(time.RFC3339)+" "+s.LastError)
		}
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
