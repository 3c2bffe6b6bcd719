package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/egress"
)

type checkTLSOptions struct {
	dnsLookupOptions
	AllowPrivate bool
}

func newCheckTLSCommand(g *globalOptions) *cobra.Command {
	var o checkTLSOptions
	cmd := &cobra.Command{
		Use:   "check-tls DOMAIN",
		Short: "Show the SMTP TLS reporting and MTA-STS set-up of any domain",
		Long: `Look up the TLS-RPT record of DOMAIN (_smtp._tls.DOMAIN, RFC 8460), its
MTA-STS record (_mta-sts.DOMAIN, RFC 8461) and fetch its MTA-STS policy
file from https://mta-sts.DOMAIN/.well-known/mta-sts.txt (5 s budget, under
the webhook address rules: public addresses only, no redirects). Prints
the records, the policy (mode, mx patterns, max_age) and the problems found.

It needs no server and no database. It exits 1 when DNS cannot answer.`,
		Example: `  dmarcd check-tls example.com
  dmarcd check-tls --json example.com`,
		Args: exactArgs(1, "the DOMAIN to check"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheckTLS(cmd.Context(), g, o, args[0])
		},
	}
	o.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.AllowPrivate, "allow-private", false, "let the policy fetch reach loopback and private addresses")
	return cmd
}

func runCheckTLS(ctx context.Context, g *globalOptions, o checkTLSOptions, domain string) error {
	name, res, ctx, cancel, err := o.start(ctx, domain)
	if err != nil {
		return err
	}
	defer cancel()
	client := egress.NewClient(res, egress.Policy{AllowPrivate: o.AllowPrivate}).WithTimeout(dnscheck.MTASTSBudget)
	defer client.CloseIdleConnections()
	result, err := (&dnscheck.TLSChecker{Resolver: res, Fetcher: client}).CheckTLS(ctx, name)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, result)
	}
	printTLSCheck(g, result)
	return nil
}

func printTLSCheck(g *globalOptions, r *dnscheck.TLSResult) {
	w := g.stdout
	fmt.Fprintf(w, "%s\n\nTLS-RPT (%s)\n", r.Domain, r.TLSRPT.RecordName)
	if r.TLSRPT.Record != nil {
		fmt.Fprintf(w, "  record:  %s\n", *r.TLSRPT.Record)
	}
	if len(r.TLSRPT.RUA) > 0 {
		fmt.Fprintf(w, "  rua:     %s\n", strings.Join(r.TLSRPT.RUA, ", "))
	}
	printFindings(g, r.TLSRPT.Errors, r.TLSRPT.Warnings)
	m := r.MTASTS
	fmt.Fprintf(w, "\nMTA-STS (%s)\n", m.RecordName)
	if m.TXTRecord != nil {
		fmt.Fprintf(w, "  record:  %s\n", *m.TXTRecord)
	}
	if p := m.Policy; p != nil {
		fmt.Fprintf(w, "  policy:  %s\n  version: %s\n  mode:    %s\n  mx:      %s\n", m.PolicyURL, p.Version, p.Mode, strings.Join(p.MX, ", "))
		if p.MaxAge != nil {
			fmt.Fprintf(w, "  max_age: %d s\n", *p.MaxAge)
		}
	}
	printFindings(g, m.Errors, m.Warnings)
}

func printFindings(g *globalOptions, errs, warns []string) {
	for _, e := range errs {
		fmt.Fprintf(g.stdout, "  error:   %s\n", e)
	}
	for _, w := range warns {
		fmt.Fprintf(g.stdout, "  warning: %s\n", w)
	}
}
