package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/senders"
)

func newDigestCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "digest",
		Short: "Show or send an organization's daily or weekly digest",
		Long: `dmarcd mails each recipient of an organization's notification settings
whose digest is daily or weekly a digest of the last complete UTC day or
week (Monday to Sunday), from 06:00 UTC after it closes (see the README's
"Digests"). 'digest preview' builds one now.`,
	}
	cmd.AddCommand(newDigestPreviewCommand(g))
	return cmd
}

type digestPreviewOptions struct {
	Org        string
	Period     string
	SendTo     string
	HTML       bool
	DNSServers []string
}

func newDigestPreviewCommand(g *globalOptions) *cobra.Command {
	var o digestPreviewOptions
	cmd := &cobra.Command{
		Use:   "preview --org ORG [--period day|week] [--send-to ADDRESS]",
		Short: "Print an organization's digest of the last complete day or week, or send it now",
		Long: `Build the digest of organization ORG for the last complete UTC day (the
default) or week (Monday to Sunday) and print its subject and plain-text
part (--html: its HTML part; --json: both): per domain the messages and
DMARC pass rate with the change since the period before, new senders,
the sender groups failing most with what to fix, the enforcement stage
and what would move it, TLS failures; then the open alerts. The figures
are those of the API's statistics for the same days.

--send-to queues it to ADDRESS in the outbox now (outside the schedule;
the scheduled digests still go out), which the running server's relay
(--mail-relay) sends; without a running server it waits there until one
runs.

While 'dmarcd serve' runs this goes through its admin socket; otherwise it
opens the database file and evaluates SPF records through --dns-server.`,
		Example: `  dmarcd digest preview --org default
  dmarcd digest preview --org default --period week --html > digest.html
  dmarcd digest preview --org default --period week --send-to ops@example.net`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDigestPreview(cmd.Context(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Org, "org", "", "organization (name or id; required)")
	f.StringVar(&o.Period, "period", "day", "day (the last complete UTC day) or week (the last complete week, Monday to Sunday)")
	f.StringVar(&o.SendTo, "send-to", "", "queue the digest to this address now instead of printing it")
	f.BoolVar(&o.HTML, "html", false, "print the HTML part instead of the text")
	f.StringSliceVar(&o.DNSServers, "dns-server", nil, "without a running server: DNS server HOST:PORT for SPF records, repeatable (default: /etc/resolv.conf)")
	requireFlags(cmd, "org")
	return cmd
}

func runDigestPreview(ctx context.Context, g *globalOptions, o digestPreviewOptions) error {
	p, err := digest.ParsePeriod(o.Period)
	if err != nil {
		return usagef("--period: %v", err)
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	local, offline := svc.(*admin.Local)
	if offline {
		// No server: evaluate SPF and name senders as serve would.
		res, err := dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers})
		if err != nil {
			return err
		}
		local.Views = &senders.Views{DB: local.DB, Known: senders.DefaultKnownSenders(), SPF: senders.NewSPFCache(res, 0), DMARC: res}
	}
	if o.SendTo != "" {
		st, err := svc.SendDigest(ctx, o.Org, p, o.SendTo)
		if err != nil {
			return err
		}
		if g.JSON {
			return printJSON(g.stdout, st)
		}
		fmt.Fprintf(g.stdout, "Queued the %s digest to %s (mail %s): %s\n", p, st.To, st.ID, st.Subject)
		if offline {
			fmt.Fprintln(g.stdout, "No server runs: it waits in the outbox until 'dmarcd serve --mail-relay HOST:PORT' sends it.")
		}
		return nil
	}
	v, err := svc.DigestPreview(ctx, o.Org, p)
	if err != nil {
		return err
	}
	switch {
	case g.JSON:
		return printJSON(g.stdout, v)
	case o.HTML:
		_, err = fmt.Fprint(g.stdout, v.HTML)
	default:
		_, err = fmt.Fprint(g.stdout, v.Text)
	}
	return err
}
