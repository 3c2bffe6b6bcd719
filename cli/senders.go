package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/senders"
)

type sendersCmdOptions struct {
	Org        string
	From, To   string
	DNSServers []string
	SenderMap  string
	now        func() time.Time
}

// defaultSendersDays is the window when --from is not given (API.md's
// default for the sender views).
const defaultSendersDays = 30

func newSendersCommand(g *globalOptions) *cobra.Command {
	o := sendersCmdOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "senders DOMAIN",
		Short: "Show who sends mail as a domain, what to fix, and how close it is to p=reject",
		Long: `Show the mail of a registered domain over a window (default: the last 30
days) grouped by who sends it, named from the reports' own evidence: a
known service whose DKIM signature verified or whose SPF (MAIL FROM)
domain passed, or under whose name the address's forward-confirmed
reverse DNS is; the domain's own mail ("example.com (own servers)",
"example.com via AS15169 Google LLC", "example.com (forwarded)"); the base
domain of the reverse DNS name; the autonomous system; else
"Unidentified". A failing signature or SPF result names nobody. Each
group has the evidence behind its name, its DMARC, aligned SPF and aligned
DKIM pass rates, a status (passing >= 95 %, failing <= 50 %, partial in
between), a category (authorized, forwarder, unknown) and hints naming the
record to fix. Below the table: the window's mail as legitimate,
forwarded and unidentified (adding up to its messages), then the domain's
stage on the way p=none -> p=quarantine -> p=reject, judged on the last
14 days, and the next record to publish. These are the API's /senders and
/policy-advice views, with the names of the web interface.

DOMAIN is a domain name (or a domain id). When several organizations
registered the name, choose one with --org.

While 'dmarcd serve' runs this goes through its admin socket and uses the
server's settings; otherwise it opens the database file and evaluates SPF
records through --dns-server, with the known senders of --sender-map.
--from and --to take a date (2026-11-20), an RFC 3339 time or Unix seconds.`,
		Example: `  dmarcd senders example.com
  dmarcd senders example.com --org acme --from 2026-11-01 --to 2026-11-30
  dmarcd senders example.com --json`,
		Args: exactArgs(1, "the DOMAIN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSenders(cmd.Context(), g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Org, "org", "", "organization (name or id) of the domain")
	f.StringVar(&o.From, "from", "", "first day of the window (default: 29 days before --to)")
	f.StringVar(&o.To, "to", "", "last day of the window (default: now)")
	f.StringSliceVar(&o.DNSServers, "dns-server", nil, "without a running server: DNS server HOST:PORT for SPF records, repeatable (default: /etc/resolv.conf)")
	f.StringVar(&o.SenderMap, "sender-map", "", "without a running server: CSV file of known senders added to the embedded map (as serve --sender-map)")
	return cmd
}

// parseWhen reads a time as API.md's date parameters do: Unix seconds, an
// RFC 3339 time, or a date meaning 00:00 UTC.
func parseWhen(flag, v string) (time.Time, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
		return time.Unix(n, 0).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--%s %q: want a date (2026-11-20), an RFC 3339 time or Unix seconds", flag, v)
}

// window resolves --from and --to.
func (o sendersCmdOptions) window() (from, to time.Time, err error) {
	to = o.now().UTC()
	if o.To != "" {
		if to, err = parseWhen("to", o.To); err != nil {
			return from, to, err
		}
	}
	from = to.Truncate(24*time.Hour).AddDate(0, 0, -(defaultSendersDays - 1))
	if o.From != "" {
		if from, err = parseWhen("from", o.From); err != nil {
			return from, to, err
		}
	}
	if to.Before(from) {
		return from, to, usagef("--to is before --from")
	}
	return from, to, nil
}

func runSenders(ctx context.Context, g *globalOptions, o sendersCmdOptions, domain string) error {
	from, to, err := o.window()
	if err != nil {
		return err
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if l, ok := svc.(*admin.Local); ok {
		// No server: evaluate SPF and name senders as serve would.
		known := senders.DefaultKnownSenders()
		if o.SenderMap != "" {
			if known, err = known.WithFile(o.SenderMap); err != nil {
				return usageError{fmt.Errorf("--sender-map: %w", err)}
			}
		}
		res, err := dnscheck.NewResolver(dnscheck.Config{Servers: o.DNSServers})
		if err != nil {
			return err
		}
		l.Views = &senders.Views{DB: l.DB, Known: known, SPF: senders.NewSPFCache(res, 0), DMARC: res}
	}
	v, err := svc.Senders(ctx, o.Org, domain, from, to)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, v)
	}
	return printSenders(g, v)
}

// percent formats a rate of 0..1 with one decimal.
func percent(r float64) string { return strconv.FormatFloat(100*r, 'f', 1, 64) + "%" }

// messagesOf is "n messages, r% passing DMARC", or "none".
func messagesOf(s senders.Share) string {
	if s.Messages == 0 {
		return "none"
	}
	return fmt.Sprintf("%d messages from %s, %s passing DMARC", s.Messages, plural(s.Groups, "sender"), percent(s.PassRate()))
}

func printSenders(g *globalOptions, v *admin.SendersView) error {
	w := g.stdout
	days := int(v.DateTo.Truncate(24*time.Hour).Sub(v.DateFrom.Truncate(24*time.Hour))/(24*time.Hour)) + 1
	fmt.Fprintf(w, "%s (organization %s), %s to %s (%d days)\n\n", v.Domain, oneLine(v.Organization, 80),
		v.DateFrom.Format(time.DateOnly), v.DateTo.Format(time.DateOnly), days)
	if len(v.Senders) == 0 {
		fmt.Fprintln(w, "No reports in this window.")
	} else {
		tw := newTable(w, "SENDER", "EVIDENCE", "CATEGORY", "IPS", "MESSAGES", "DMARC", "SPF ALIGNED", "DKIM ALIGNED", "STATUS")
		for _, s := range v.Senders {
			evidence := "-"
			if len(s.EvidenceDetails) > 0 {
				evidence = s.EvidenceDetails[0].String()
				if n := len(s.EvidenceDetails) - 1; n > 0 {
					evidence += fmt.Sprintf(" and %d more", n)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", oneLine(s.Name, 50), oneLine(evidence, 60), s.Category, s.SourceIPs,
				s.Messages, percent(s.DMARCPassRate), percent(s.SPFAlignedRate), percent(s.DKIMAlignedRate), s.Status)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		b := v.Breakdown
		fmt.Fprintf(w, "\n%d messages in these %d days:\n", b.Messages, days)
		fmt.Fprintf(w, "  legitimate (authorized senders): %s\n", messagesOf(b.Legitimate))
		fmt.Fprintf(w, "  forwarded (your DKIM, relayed on): %s\n", messagesOf(b.Forwarded))
		fmt.Fprintf(w, "  unidentified (no evidence it is yours; p=reject stops it): %s\n", messagesOf(b.Unidentified))
		first := true
		for _, s := range v.Senders {
			for _, h := range s.Hints {
				if first {
					fmt.Fprintln(w, "\nWhat to fix:")
					first = false
				}
				fmt.Fprintf(w, "  %s: %s\n", oneLine(s.Name, 50), oneLine(h, 400))
			}
		}
	}
	a := v.Advice
	if a == nil {
		return nil
	}
	fmt.Fprintln(w)
	published := "none"
	if a.Published != nil && a.Published.P != nil {
		published = "p=" + *a.Published.P
		if a.Published.T != nil {
			published += "; t=" + *a.Published.T
		}
		if a.Published.PCT != nil {
			published += "; pct=" + strconv.Itoa(*a.Published.PCT)
		}
	}
	fmt.Fprintf(w, "Enforcement: %s (published: %s)\n", strings.ReplaceAll(a.Stage, "_", " "), published)
	if a.LegitimateMessages > 0 {
		fmt.Fprintf(w, "  over the last %d days, legitimate and forwarded mail passing DMARC: %s of %d messages\n",
			min(a.WindowDays, senders.DefaultThresholds.ReadyDays), percent(a.LegitimatePassRate), a.LegitimateMessages)
	}
	for _, r := range a.Reasons {
		fmt.Fprintf(w, "  %s\n", oneLine(r, 400))
	}
	if a.NextRecord != nil {
		fmt.Fprintf(w, "  next record: _dmarc.%s TXT \"%s\"\n", v.Domain, oneLine(*a.NextRecord, 1000))
	}
	return nil
}
