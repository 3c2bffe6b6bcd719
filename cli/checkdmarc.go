package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
)

type checkDMARCOptions struct {
	dnsLookupOptions
}

// dnsLookupOptions are the flags of the commands that look a domain up in
// the DNS themselves, with no server (check-dmarc, check-tls).
type dnsLookupOptions struct {
	DNSServers []string
	DNSTimeout time.Duration
	Timeout    time.Duration
}

func (o *dnsLookupOptions) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&o.DNSServers, "dns-server", nil, "DNS server HOST:PORT to ask, repeatable (default: /etc/resolv.conf)")
	durationVar(cmd.Flags(), &o.DNSTimeout, "dns-timeout", 2*time.Second, "timeout of one DNS query attempt, as in serve (each server is tried twice)")
	durationVar(cmd.Flags(), &o.Timeout, "timeout", 15*time.Second, "give up after this long")
}

// start normalizes domain and returns it with a resolver of the flags'
// servers and ctx bounded by --timeout (cancel releases it).
func (o dnsLookupOptions) start(ctx context.Context, domain string) (string, *dnscheck.Resolver, context.Context, context.CancelFunc, error) {
	name, err := dmarc.NormalizeDomain(domain)
	if err != nil {
		return "", nil, nil, nil, usageError{err}
	}
	if o.DNSTimeout <= 0 || o.Timeout <= 0 {
		return "", nil, nil, nil, usagef("--dns-timeout and --timeout must be positive")
	}
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers, Timeout: o.DNSTimeout})
	if err != nil {
		return "", nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	return name, res, ctx, cancel, nil
}

func newCheckDMARCCommand(g *globalOptions) *cobra.Command {
	var o checkDMARCOptions
	cmd := &cobra.Command{
		Use:   "check-dmarc DOMAIN",
		Short: "Show and explain the DMARC record of any domain",
		Long: `Look up the DMARC record of DOMAIN the way receivers do: _dmarc.DOMAIN, then
the RFC 9989 DNS tree walk up to the organizational domain when DOMAIN has
none. Prints the record, the effective policy (RFC 7489 defaults filled in),
the reporting addresses, warnings (p=none, pct<100, tags RFC 9989 removed,
...) and errors, and checks that every rua/ruf host outside the domain
publishes the <domain>._report._dmarc.<host> authorization record.

It needs no server and no database. It exits 1 when DNS cannot answer
(SERVFAIL, timeout); a domain without a record is a result, not an error.`,
		Example: `  dmarcd check-dmarc example.com
  dmarcd check-dmarc --dns-server 1.1.1.1 --json example.com`,
		Args: exactArgs(1, "the DOMAIN to check"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheckDMARC(cmd.Context(), g, o, args[0])
		},
	}
	o.AddFlags(cmd)
	return cmd
}

func runCheckDMARC(ctx context.Context, g *globalOptions, o checkDMARCOptions, domain string) error {
	name, res, ctx, cancel, err := o.start(ctx, domain)
	if err != nil {
		return err
	}
	defer cancel()
	result, err := (&dnscheck.Checker{Resolver: res}).CheckDMARC(ctx, name)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, result)
	}
	printCheck(g, result)
	return nil
}

func printCheck(g *globalOptions, r *dnscheck.CheckResult) {
	w := g.stdout
	if !r.Found {
		fmt.Fprintf(w, "%s: no DMARC record (looked up %s and its parents)\n", r.Domain, r.RecordName)
	} else {
		from := ""
		if r.InheritedFrom != nil {
			from = fmt.Sprintf(" (inherited from %s)", *r.InheritedFrom)
		}
		fmt.Fprintf(w, "%s: %s%s\n  %s\n", r.Domain, r.RecordName, from, *r.Record)
		validity := "valid"
		if !r.Valid {
			validity = "INVALID"
		}
		fmt.Fprintf(w, "  record is %s\n", validity)
	}
	if p := r.Policy; p != nil {
		fmt.Fprintf(w, "policy: p=%s sp=%s np=%s pct=%d adkim=%s aspf=%s fo=%s\n", p.P, p.SP, p.NP, p.PCT, p.ADKIM, p.ASPF, p.FO)
	}
	if len(r.RUA) > 0 {
		fmt.Fprintf(w, "aggregate reports (rua): %s\n", strings.Join(r.RUA, ", "))
	}
	if len(r.RUF) > 0 {
		fmt.Fprintf(w, "failure reports (ruf): %s\n", strings.Join(r.RUF, ", "))
	}
	for _, a := range r.ExternalAuthorization {
		state := "unknown (DNS did not answer)"
		if a.Authorized != nil && *a.Authorized {
			state = "authorized"
		} else if a.Authorized != nil {
			state = "NOT authorized"
		}
		fmt.Fprintf(w, "external destination %s: %s\n", a.Host, state)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	for _, x := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", x)
	}
}
