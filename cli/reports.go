package cli

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
)

func newReportsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reports",
		Short: "Read the stored aggregate reports: list, show, stats",
		Long: `Read what dmarcd stored without the API: list reports, show one with its
records, and sum up a domain's statistics. Tables for reading; --json for
scripts (the API's report and statistics objects). Like every command
they go through the server's admin socket while it runs, and read the
database file otherwise.

--org is the organization's name or id; it may be left out when there is
only one. --domain is a registered domain name of that organization.`,
	}
	cmd.AddCommand(newReportsListCommand(g), newReportsShowCommand(g), newReportsStatsCommand(g))
	return cmd
}

type reportsListOptions struct {
	Org, Domain, Cursor string
	Limit               int
}

func newReportsListCommand(g *globalOptions) *cobra.Command {
	var o reportsListOptions
	cmd := &cobra.Command{
		Use:   "list [--org ORG] [--domain DOMAIN]",
		Short: "List aggregate reports, newest first",
		Example: `  dmarcd reports list
  dmarcd reports list --org acme --domain example.com --limit 50
  dmarcd reports list --json | jq -r '.reports[].id'`,
		Args: exactArgs(0, "no arguments (use --org and --domain)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := admin.ReportQuery{Org: o.Org, Domain: o.Domain, Limit: o.Limit}
			if o.Cursor != "" {
				after, err := base64.RawURLEncoding.DecodeString(o.Cursor)
				if err != nil || len(after) == 0 {
					return usagef("--cursor %q: give the value a previous list printed after 'more:'", o.Cursor)
				}
				q.After = after
			}
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := svc.ListReports(cmd.Context(), q)
			if err != nil {
				return err
			}
			next := ""
			if res.Next != nil {
				next = base64.RawURLEncoding.EncodeToString(res.Next)
			}
			if g.JSON {
				return printJSON(g.stdout, map[string]any{"organization": res.Organization.Name, "reports": res.Reports,
					"total": res.Total, "next_cursor": nullable(next)})
			}
			tw := newTable(g.stdout, "ID", "DOMAIN", "REPORTER", "BEGIN", "END", "MESSAGES", "DMARC PASS", "FAIL")
			for _, r := range res.Reports {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.ID, r.Domain, r.OrgName, r.DateBegin.Format(time.DateOnly),
					r.DateEnd.Format(time.DateOnly), r.MessageCount, r.DMARCPassCount, r.DMARCFailCount)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%d of %d reports of organization %s", len(res.Reports), res.Total, res.Organization.Name)
			if next != "" {
				fmt.Fprintf(g.stdout, "; more: add --cursor %s", next)
			}
			fmt.Fprintln(g.stdout)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (needed when there are several)")
	cmd.Flags().StringVar(&o.Domain, "domain", "", "only the reports of this domain")
	cmd.Flags().IntVar(&o.Limit, "limit", 20, "reports per page (1-1000)")
	cmd.Flags().StringVar(&o.Cursor, "cursor", "", "go on after a previous page (the value it printed after 'more:')")
	return cmd
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func newReportsShowCommand(g *globalOptions) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:     "show REPORT_ID",
		Short:   "Show one aggregate report with its records",
		Example: "  dmarcd reports show 0193a1e2-7b4c-7d2e-9f00-1a2b3c4d5e6f\n  dmarcd reports show --json ID",
		Args:    exactArgs(1, "the REPORT_ID (see dmarcd reports list)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			d, err := svc.ShowReport(cmd.Context(), org, args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, struct {
					*admin.ReportDetail
				}{d})
			}
			r := d.Report
			pp := r.PolicyPublished
			fmt.Fprintf(g.stdout, "Report %s\n  domain      %s\n  reporter    %s <%s>, report id %s\n  period      %s to %s\n  received    %s\n  policy      p=%s pct=%d adkim=%s aspf=%s\n  messages    %d (DMARC pass %d, fail %d)\n\n",
				r.ID, r.Domain, r.OrgName, r.OrgEmail, r.ExternalReportID, r.DateBegin.Format(time.RFC3339), r.DateEnd.Format(time.RFC3339),
				r.ReceivedAt.Format(time.RFC3339), pp.P, pp.PCT, pp.ADKIM, pp.ASPF, r.MessageCount, r.DMARCPassCount, r.DMARCFailCount)
			tw := newTable(g.stdout, "SOURCE IP", "COUNT", "DISPOSITION", "DKIM", "SPF", "DMARC", "HEADER FROM", "COUNTRY", "AS")
			for _, rec := range d.Records {
				country, as := "", ""
				if rec.Geo != nil {
					country = deref(rec.Geo.CountryCode)
					as = deref(rec.Geo.ASOrg)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rec.SourceIP, rec.Count, rec.Disposition, rec.DKIM, rec.SPF,
					rec.DMARC, rec.HeaderFrom, country, as)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organization name or id (default: look in every one)")
	return cmd
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

type reportsStatsOptions struct {
	Org, Domain string
	Days        int
}

func newReportsStatsCommand(g *globalOptions) *cobra.Command {
	var o reportsStatsOptions
	cmd := &cobra.Command{
		Use:   "stats [--org ORG] [--domain DOMAIN] [--days N]",
		Short: "Sum up the reports of each domain (or one) over the last days",
		Example: `  dmarcd reports stats
  dmarcd reports stats --domain example.com --days 7`,
		Args: exactArgs(0, "no arguments (use --org, --domain and --days)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			res, err := svc.ReportStats(cmd.Context(), admin.StatsQuery{Org: o.Org, Domain: o.Domain, Days: o.Days})
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, res)
			}
			fmt.Fprintf(g.stdout, "Organization %s, the last %d days:\n", res.Organization.Name, o.Days)
			tw := newTable(g.stdout, "DOMAIN", "REPORTS", "MESSAGES", "DMARC PASS", "FAIL", "PASS RATE", "DKIM FAIL", "SPF FAIL", "TOP SOURCES")
			for _, d := range res.Domains {
				s := d.Stats
				var top []string
				for i, src := range s.TopSources {
					if i == 3 {
						break
					}
					top = append(top, fmt.Sprintf("%s (%d)", src.SourceIP, src.Messages))
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f%%\t%d\t%d\t%s\n", d.Name, s.ReportCount, s.MessageCount, s.DMARC.Pass,
					s.DMARC.Fail, s.DMARC.PassRate*100, s.DKIM.Fail, s.SPF.Fail, strings.Join(top, ", "))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (needed when there are several)")
	cmd.Flags().StringVar(&o.Domain, "domain", "", "only this domain")
	cmd.Flags().IntVar(&o.Days, "days", 30, "how many UTC days, up to today (1-366)")
	return cmd
}
