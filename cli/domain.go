package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/dmarc"
	"github.com/dmarcd/dmarcd/dnscheck"
)

func newDomainCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "domain",
		Short: "Add, list, verify and delete the domains dmarcd monitors",
		Long: `A domain is monitored once it is added: dmarcd gives it a reporting address
and suggests the DMARC record that sends reports there (keeping the tags
the domain already publishes), and verification checks that the record is
published. These commands follow the API's rules (POST /api/v1/domains,
.../verify, DELETE).

While a server runs they go through its admin socket and use its
--reporting-domain, --public-url and DNS servers. Without a server they
open the database file; then 'add' and 'verify' look the domain up in the
DNS themselves (--dns-server) and 'add' needs the reporting domain the
server uses (--reporting-domain; otherwise that of the domains already
added, else this host's name).

DOMAIN is a domain's name or id. --org names the organization (a name or
id); without it 'add' uses the only one there is, and the others the one
that has DOMAIN.`,
	}
	cmd.AddCommand(newDomainAddCommand(g), newDomainListCommand(g), newDomainVerifyCommand(g), newDomainDeleteCommand(g))
	return cmd
}

// domainOfflineOptions are what 'domain add' and 'verify' need when no
// server runs: the DNS, and for add the reporting domain and public URL.
type domainOfflineOptions struct {
	dnsLookupOptions
	ReportingDomain string
	PublicURL       string
}

func (o *domainOfflineOptions) AddFlags(cmd *cobra.Command, add bool) {
	o.dnsLookupOptions.AddFlags(cmd)
	if add {
		cmd.Flags().StringVar(&o.ReportingDomain, "reporting-domain", "", "without a server: the domain of the reporting address, the server's --reporting-domain (default: that of the domains already added, else this host's name)")
		cmd.Flags().StringVar(&o.PublicURL, "public-url", "", "without a server: the server's --public-url, for the TLS-RPT record's https address")
	}
}

// openDomains returns the admin service for the domain commands: the
// running server's socket, else the file with the API's domain rules over
// the DNS of o (and, when needRD, a reporting domain). close releases it.
func (g *globalOptions) openDomains(ctx context.Context, o domainOfflineOptions, needRD bool) (svc admin.Service, close func(), err error) {
	if c, ok, err := g.dialAdmin(ctx); err != nil {
		return nil, nil, err
	} else if ok {
		return c, c.Close, nil
	}
	if o.DNSTimeout <= 0 || o.Timeout <= 0 {
		return nil, nil, usagef("--dns-timeout and --timeout must be positive")
	}
	public := serveOptions{PublicURL: o.PublicURL}
	if err := public.checkPublicURL(); err != nil {
		return nil, nil, err
	}
	if err := g.requireDatabase(); err != nil {
		return nil, nil, err
	}
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers, Timeout: o.DNSTimeout})
	if err != nil {
		return nil, nil, usageError{err}
	}
	db, err := g.openStore(false)
	if err != nil {
		return nil, nil, err
	}
	rd := ""
	if needRD {
		if rd, err = g.offlineReportingDomain(ctx, &admin.Local{DB: db}, o.ReportingDomain); err != nil {
			db.Close()
			return nil, nil, err
		}
	}
	// The application layer's domain rules, as serve runs them.
	local := &admin.Local{DB: db, App: app.New(app.Config{Store: db, DNS: &dnscheck.Checker{Resolver: res},
		ReportingDomain: rd, PublicURL: public.PublicURL, DNSTimeout: o.Timeout})}
	return local, func() { db.Close() }, nil
}

// offlineReportingDomain is the reporting domain of a domain added
// without a server: --reporting-domain, else that of the newest domain
// (the server moves unverified addresses to its own at start), else this
// host's name. Unless given, a note on stderr says which and why.
func (g *globalOptions) offlineReportingDomain(ctx context.Context, l *admin.Local, flag string) (string, error) {
	if flag != "" {
		rd, err := dmarc.NormalizeDomain(flag)
		if err != nil {
			return "", usagef("--reporting-domain %q: %v", flag, err)
		}
		return rd, nil
	}
	doms, err := l.ListDomains(ctx, "")
	if err != nil {
		return "", err
	}
	var newest *admin.DomainEntry
	for _, d := range doms {
		if newest == nil || d.CreatedAt.After(newest.CreatedAt) {
			newest = d
		}
	}
	source, rd := "", ""
	if newest != nil {
		_, rd, _ = strings.Cut(newest.ReportingEmail, "@")
		source = "that of the newest domain, " + newest.Name
	}
	if rd == "" {
		host, _ := hostname()
		if rd, err = dmarc.NormalizeDomain(host); err != nil {
			return "", usagef("no server runs and this host's name %q is no reporting domain: give the server's with --reporting-domain", host)
		}
		source = "this host's name"
	}
	fmt.Fprintf(g.stderr, "No dmarcd server answers on %s: the reporting address is at %s (%s). "+
		"If the server runs with another --reporting-domain, it moves this unverified domain's address there when it starts; "+
		"give --reporting-domain to choose now.\n", g.socketPath(), rd, source)
	return rd, nil
}

type domainAddOptions struct {
	Org string
	domainOfflineOptions
}

func newDomainAddCommand(g *globalOptions) *cobra.Command {
	var o domainAddOptions
	cmd := &cobra.Command{
		Use:   "add DOMAIN [--org ORG]",
		Short: "Add a domain and print the DNS records to publish",
		Long: `Add DOMAIN (e.g. example.com) to an organization, as POST /api/v1/domains
does: it gets a reporting address, and the DMARC record to publish keeps
what _dmarc.DOMAIN already publishes (its policy, its other addresses) and
adds that address. Prints the records to publish, then how to verify.
--json prints the API's answer (the domain and dns_records).

A name that can never be registered (an IP address, .localhost, a label
with an underscore) is refused naming the label and why. When the DNS
cannot tell whether the domain has a record, nothing is added.`,
		Example: `  dmarcd domain add example.com
  dmarcd domain add example.com --org acme --json`,
		Args: exactArgs(1, "the DOMAIN to add"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDomainAdd(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (default: the only one)")
	o.domainOfflineOptions.AddFlags(cmd, true)
	return cmd
}

func runDomainAdd(ctx context.Context, g *globalOptions, o domainAddOptions, name string) error {
	if _, err := dmarc.NormalizeDomain(name); err != nil {
		return usageError{fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "dmarc: "))}
	}
	svc, done, err := g.openDomains(ctx, o.domainOfflineOptions, true)
	if err != nil {
		return err
	}
	defer done()
	d, err := svc.AddDomain(ctx, o.Org, name)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, d)
	}
	w := g.stdout
	fmt.Fprintf(w, "Added %s to organization %s (id %s, status %s).\nReports for it go to %s.\n\nPublish these DNS records:\n\n",
		d.Name, d.Organization, d.ID, d.Status, d.ReportingEmail)
	_, rd, _ := strings.Cut(d.ReportingEmail, "@")
	for _, r := range d.DNSRecords {
		fmt.Fprintf(w, "  %s  %s\n      %s\n", r.Name, r.Type, r.Value)
		if strings.HasPrefix(r.Name, d.Name+"._report._dmarc.") {
			fmt.Fprintf(w, "      (in the zone of %s; a wildcard *._report._dmarc.%s covers every domain: it lets receivers\n"+
				"      send reports for %s to another domain, RFC 7489 section 7.1)\n", rd, rd, d.Name)
		}
	}
	fmt.Fprintf(w, "\nThen verify: %s domain verify %s%s\n"+
		"(a running server also verifies pending domains on its own, every --verify-interval.)\n",
		g.invocation(), d.Name, orgFlag(o.Org))
	return nil
}

// orgFlag repeats --org for a hint, when one was given.
func orgFlag(org string) string {
	if org == "" {
		return ""
	}
	return " --org " + shellQuote(org)
}

type domainListOptions struct{ Org string }

func newDomainListCommand(g *globalOptions) *cobra.Command {
	var o domainListOptions
	cmd := &cobra.Command{
		Use:   "list [--org ORG]",
		Short: "List the domains of one organization, or of all",
		Example: `  dmarcd domain list
  dmarcd domain list --org acme --json`,
		Args: exactArgs(0, "no arguments (use --org)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDomainList(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (default: all)")
	return cmd
}

func runDomainList(ctx context.Context, g *globalOptions, o domainListOptions) error {
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	doms, err := svc.ListDomains(ctx, o.Org)
	if err != nil {
		return err
	}
	if g.JSON {
		if doms == nil {
			doms = []*admin.DomainEntry{}
		}
		return printJSON(g.stdout, doms)
	}
	if len(doms) == 0 {
		fmt.Fprintf(g.stdout, "No domains yet: add one with '%s domain add example.com'.\n", g.invocation())
		return nil
	}
	tw := newTable(g.stdout, "NAME", "STATUS", "ORGANIZATION", "REPORTING ADDRESS", "LAST REPORT", "ID")
	for _, d := range doms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.Name, d.Status, d.Organization, d.ReportingEmail, timeOrNever(d.LastReportAt), d.ID)
	}
	return tw.Flush()
}

type domainVerifyOptions struct {
	Org string
	domainOfflineOptions
}

func newDomainVerifyCommand(g *globalOptions) *cobra.Command {
	var o domainVerifyOptions
	cmd := &cobra.Command{
		Use:   "verify DOMAIN [--org ORG]",
		Short: "Check that the domain's DMARC record lists its reporting address",
		Long: `Look up _dmarc.DOMAIN as POST /api/v1/domains/{id}/verify does: when it holds
one valid DMARC record whose rua lists the domain's reporting address, the
domain becomes active. Otherwise it exits 1 with the reason (no record,
several, not DMARC, the address missing) and changes nothing.`,
		Example: `  dmarcd domain verify example.com`,
		Args:    exactArgs(1, "the DOMAIN to verify"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDomainVerify(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (default: the one that has DOMAIN)")
	o.domainOfflineOptions.AddFlags(cmd, false)
	return cmd
}

func runDomainVerify(ctx context.Context, g *globalOptions, o domainVerifyOptions, domain string) error {
	svc, done, err := g.openDomains(ctx, o.domainOfflineOptions, false)
	if err != nil {
		return err
	}
	defer done()
	d, err := svc.VerifyDomain(ctx, o.Org, domain)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, struct {
			Verified bool `json:"verified"`
			*admin.DomainEntry
		}{true, d})
	}
	fmt.Fprintf(g.stdout, "%s is verified: its DMARC record lists %s. Status %s since %s.\n",
		d.Name, d.ReportingEmail, d.Status, d.VerifiedAt.Format(time.RFC3339))
	return nil
}

type domainDeleteOptions struct {
	Org string
	Yes bool
}

func newDomainDeleteCommand(g *globalOptions) *cobra.Command {
	var o domainDeleteOptions
	cmd := &cobra.Command{
		Use:   "delete DOMAIN [--org ORG]",
		Short: "Delete a domain with its reports and alerts",
		Long: `Delete DOMAIN with its aggregate, failure and TLS reports, statistics and
alerts, as DELETE /api/v1/domains/{id} does. Mail to its reporting address
is refused from then on. This cannot be undone.

It asks for the domain's name to confirm; without a terminal, or to skip
the question, pass --yes.`,
		Example: `  dmarcd domain delete example.com
  dmarcd domain delete example.com --org acme --yes`,
		Args: exactArgs(1, "the DOMAIN to delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDomainDelete(cmd.Context(), g, o, args[0], cmd.InOrStdin())
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (default: the one that has DOMAIN)")
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "delete without asking")
	return cmd
}

func runDomainDelete(ctx context.Context, g *globalOptions, o domainDeleteOptions, domain string, stdin io.Reader) error {
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if !o.Yes {
		if !isTerminal(stdin) {
			return usagef("domain delete %s: confirm with --yes (standard input is no terminal to ask on)", domain)
		}
		// Ask with the domain's name and organization, also when
		// DOMAIN is an id; DeleteDomain checks again.
		doms, err := svc.ListDomains(ctx, o.Org)
		if err != nil {
			return err
		}
		ref := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(domain), "."))
		var d *admin.DomainEntry
		for _, x := range doms {
			if x.Name == ref || x.ID == ref {
				if d != nil {
					return usagef("%s is registered in several organizations: choose one with --org", domain)
				}
				d = x
			}
		}
		if d == nil {
			return fmt.Errorf("no domain %s ('%s domain list' shows them)", domain, g.invocation())
		}
		fmt.Fprintf(g.stderr, "This deletes %s of organization %s with all its reports and alerts, for good.\nType its name to confirm: ", d.Name, d.Organization)
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if !strings.EqualFold(strings.TrimSuffix(strings.TrimSpace(line), "."), d.Name) {
			return fmt.Errorf("not confirmed: nothing deleted")
		}
	}
	d, err := svc.DeleteDomain(ctx, o.Org, domain)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, d)
	}
	fmt.Fprintf(g.stdout, "Deleted %s (id %s) of organization %s, with its reports and alerts.\n", d.Name, d.ID, d.Organization)
	return nil
}
