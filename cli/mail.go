package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
)

func newMailCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mail",
		Short: "Check the mail relay and see what mail dmarcd sent",
		Long: `dmarcd mails alerts and digests through the relay of 'dmarcd serve
--mail-relay' (see the README's "Email notifications"). Mail waits in a
durable outbox until the relay takes it: retried on a 4xx answer or no
connection, given up on a 5xx answer.

'mail test' goes through the running server (it uses the server's relay
settings); 'mail list' reads the running server's mail log, or the
database when no server runs.`,
	}
	cmd.AddCommand(newMailTestCommand(g), newMailListCommand(g))
	return cmd
}

type mailTestOptions struct{ To string }

func newMailTestCommand(g *globalOptions) *cobra.Command {
	var o mailTestOptions
	cmd := &cobra.Command{
		Use:   "test --to ADDRESS",
		Short: "Send a test message through the running server's relay now, and print the relay's answer",
		Long: `Send a short test message to ADDRESS through the relay of the running server
(--mail-relay, --mail-relay-tls, --mail-relay-user, --mail-from), at once and
not through the outbox, and print what the relay answered. It exits 0 when
the relay took the message (250) and 1 otherwise.`,
		Example: `  dmarcd mail test --to ops@example.net`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := admin.Dial(ctx, g.socketPath())
			if err != nil {
				return fmt.Errorf("mail test needs the running server ('dmarcd serve --data-dir %s --mail-relay HOST:PORT --mail-from ADDRESS'), whose relay settings it uses: %w", g.DataDir, err)
			}
			defer c.Close()
			res, err := c.SendTestMail(ctx, o.To)
			if err != nil {
				return err
			}
			if g.JSON {
				if err := printJSON(g.stdout, res); err != nil {
					return err
				}
			} else if res.Sent {
				fmt.Fprintf(g.stdout, "Sent a test message to %s through %s; the relay answered: 250 %s\n", res.To, res.Relay, res.Reply)
			} else {
				how := "temporary failure: the relay may take it later"
				if res.Permanent {
					how = "refused for good (5xx)"
				}
				fmt.Fprintf(g.stdout, "Not sent to %s through %s (%s): %s\n", res.To, res.Relay, how, res.Error)
			}
			if !res.Sent {
				return errors.New("the relay did not take the test message")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.To, "to", "", "recipient address (required)")
	requireFlags(cmd, "to")
	return cmd
}

type mailListOptions struct {
	Org   string
	Limit int
}

func newMailListCommand(g *globalOptions) *cobra.Command {
	var o mailListOptions
	cmd := &cobra.Command{
		Use:   "list [--org ORG] [--limit N]",
		Short: "List the newest mails: queued, sent or failed, with the relay's last answer",
		Example: `  dmarcd mail list
  dmarcd mail list --org default --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			log, err := svc.MailLog(cmd.Context(), o.Org, o.Limit)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, log)
			}
			if len(log) == 0 {
				fmt.Fprintln(g.stdout, "No mail yet.")
				return nil
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tTO\tSTATUS\tATTEMPTS\tQUEUED\tLAST ERROR")
			for _, m := range log {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID, m.Kind, m.To, m.Status, m.Attempts,
					m.CreatedAt.UTC().Format(time.DateTime), m.LastError)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "only this organization's mail (name or id; default: all)")
	cmd.Flags().IntVar(&o.Limit, "limit", 50, "most mails listed (at most 200)")
	return cmd
}
