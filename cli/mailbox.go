package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/app"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

func newMailboxCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mailbox",
		Short: "Add, list, remove and poll the IMAP mailboxes reports are read from",
		Long: `dmarcd can read reports from a mailbox they already arrive in (rua=mailto:
pointing at your own mail server). A mailbox belongs to one organization;
its reports are routed only to that organization's domains.

Mail is read past a remembered UID (never by the \Seen flag, with
BODY.PEEK, so a mail client reading the box changes nothing). Mail that
holds a report is moved to --archive-folder only after its reports are
stored (or the mail quarantined); other mail is left untouched. Passwords
are stored encrypted with the key <data-dir>/secret.key: keep that file
with your database backups.

These commands go through the running server when there is one, else they
open the database themselves (add, list and remove; poll needs the
server).`,
	}
	cmd.AddCommand(newMailboxAddCommand(g), newMailboxListCommand(g), newMailboxRemoveCommand(g), newMailboxPollCommand(g))
	return cmd
}

type mailboxAddOptions struct {
	Org, Host, Security, Username, Folder, Archive, PasswordFile string
	Port                                                         int
	// Used only without a running server (the server's own flags apply
	// otherwise).
	IMAP imapOptions
}

func newMailboxAddCommand(g *globalOptions) *cobra.Command {
	var o mailboxAddOptions
	cmd := &cobra.Command{
		Use:   "add --org ORG --host HOST --username USER [--password-file FILE]",
		Short: "Add a mailbox (a connection and login are tried first)",
		Long: `Add a mailbox with password sign-in. The password is read from
--password-file (its first line), or else asked for on the terminal
without echo, or read from the first line of standard input; it is never
a command-line argument. A connection and login are tried before the
mailbox is saved. For OAuth2 sign-in (Microsoft 365, Gmail) use the REST
API (POST /api/v1/mailboxes with "auth": "oauth2").`,
		Example: `  dmarcd mailbox add --org default --host imap.example.com --username dmarc@example.com
  dmarcd mailbox add --org acme --host mail.acme.test --security starttls --username rua \
      --password-file /run/secrets/imap --folder INBOX --archive-folder Archive/dmarcd`,
		Args: exactArgs(0, "no arguments (use the flags)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMailboxAdd(cmd.Context(), g, cmd.InOrStdin(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Org, "org", "", "organization name or id (required)")
	f.StringVar(&o.Host, "host", "", "IMAP server host name (required)")
	f.IntVar(&o.Port, "port", 0, "IMAP port (default 993 with tls, 143 otherwise)")
	f.StringVar(&o.Security, "security", imapin.SecurityTLS, "tls (implicit, 993), starttls (143) or plain (only with a server run with --imap-allow-plaintext)")
	f.StringVar(&o.Username, "username", "", "user name to sign in with (required)")
	f.StringVar(&o.Folder, "folder", "INBOX", "folder the reports arrive in")
	f.StringVar(&o.Archive, "archive-folder", app.DefaultArchiveFolder, `folder mail with reports is moved to once stored ("" leaves it in place)`)
	f.StringVar(&o.PasswordFile, "password-file", "", "file whose first line is the password (default: ask, or read standard input)")
	o.IMAP.AddFlags(cmd)
	_ = f.MarkHidden("imap-interval")
	for _, req := range []string{"org", "host", "username"} {
		_ = cmd.MarkFlagRequired(req)
	}
	return cmd
}

// readPassword reads the password: from file, else from the terminal
// without echo, else the first line of stdin.
func readPassword(g *globalOptions, stdin io.Reader, file string) (string, error) {
	var line string
	switch f, isFile := stdin.(*os.File); {
	case file != "":
		raw, err := os.ReadFile(file)
		if err != nil {
			return "", usagef("--password-file: %v", err)
		}
		line, _, _ = strings.Cut(string(raw), "\n")
	case isFile && term.IsTerminal(int(f.Fd())):
		fmt.Fprint(g.stderr, "Password: ")
		raw, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(g.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the password: %w", err)
		}
		line = string(raw)
	default:
		s, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the password from standard input: %w", err)
		}
		line = s
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usagef("the password is empty (give it with --password-file, on the terminal, or on standard input)")
	}
	return line, nil
}

func runMailboxAdd(ctx context.Context, g *globalOptions, stdin io.Reader, o mailboxAddOptions) error {
	pass, err := readPassword(g, stdin, o.PasswordFile)
	if err != nil {
		return err
	}
	spec := app.MailboxSpec{Host: &o.Host, Security: &o.Security, Username: &o.Username, Folder: &o.Folder,
		ArchiveFolder: &o.Archive, Password: &pass}
	if o.Port != 0 {
		spec.Port = &o.Port
	}
	svc, done, err := g.openMailboxes(ctx, o.IMAP)
	if err != nil {
		return err
	}
	defer done()
	m, err := svc.AddMailbox(ctx, o.Org, spec)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, m)
	}
	fmt.Fprintf(g.stdout, "Added mailbox %s@%s:%d/%s (id %s). Signed in successfully.\n", m.Username, m.Host, m.Port, m.Folder, m.ID)
	return nil
}

type mailboxOrgOptions struct{ Org string }

func newMailboxListCommand(g *globalOptions) *cobra.Command {
	var o mailboxOrgOptions
	cmd := &cobra.Command{
		Use:     "list --org ORG",
		Short:   "List the mailboxes of an organization with their status",
		Example: "  dmarcd mailbox list --org default",
		Args:    exactArgs(0, "no arguments (use --org)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, done, err := g.openMailboxes(cmd.Context(), imapOptions{})
			if err != nil {
				return err
			}
			defer done()
			boxes, err := svc.ListMailboxes(cmd.Context(), o.Org)
			if err != nil {
				return err
			}
			if g.JSON {
				if boxes == nil {
					boxes = []*store.Mailbox{}
				}
				return printJSON(g.stdout, boxes)
			}
			tw := newTable(g.stdout, "ID", "MAILBOX", "SECURITY", "ARCHIVE", "ACTIVE", "LAST POLL", "IMPORTED", "LAST ERROR")
			for _, m := range boxes {
				le := "-"
				if m.LastError != nil {
					le = *m.LastError
				}
				fmt.Fprintf(tw, "%s\t%s@%s:%d/%s\t%s\t%s\t%v\t%s\t%d\t%s\n", m.ID, m.Username, m.Host, m.Port, m.Folder,
					m.Security, orDash(m.ArchiveFolder), m.IsActive, timeOrNever(m.LastPollAt), m.MessagesImported, le)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (required)")
	_ = cmd.MarkFlagRequired("org")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newMailboxRemoveCommand(g *globalOptions) *cobra.Command {
	var o mailboxOrgOptions
	cmd := &cobra.Command{
		Use:     "remove --org ORG MAILBOX_ID",
		Short:   "Remove a mailbox (its mail is left where it is)",
		Example: "  dmarcd mailbox remove --org default 0193a1e2-7b4c-7d2e-9f00-1a2b3c4d5e6f",
		Args:    exactArgs(1, "the MAILBOX_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, done, err := g.openMailboxes(cmd.Context(), imapOptions{})
			if err != nil {
				return err
			}
			defer done()
			if err := svc.RemoveMailbox(cmd.Context(), o.Org, args[0]); err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, map[string]string{"removed": args[0]})
			}
			fmt.Fprintf(g.stdout, "Removed mailbox %s.\n", args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (required)")
	_ = cmd.MarkFlagRequired("org")
	return cmd
}

func newMailboxPollCommand(g *globalOptions) *cobra.Command {
	var o mailboxOrgOptions
	cmd := &cobra.Command{
		Use:     "poll --org ORG MAILBOX_ID",
		Short:   "Poll a mailbox now (needs the running server)",
		Example: "  dmarcd mailbox poll --org default 0193a1e2-7b4c-7d2e-9f00-1a2b3c4d5e6f",
		Args:    exactArgs(1, "the MAILBOX_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := admin.Dial(ctx, g.socketPath())
			if err != nil {
				return fmt.Errorf("polling needs the running server ('dmarcd serve --data-dir %s'): %w", g.DataDir, err)
			}
			defer c.Close()
			res, err := c.PollMailbox(ctx, o.Org, args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, res)
			}
			fmt.Fprintf(g.stdout, "Read %d mails: %d aggregate, %d failure, %d TLS reports, %d quarantined, %d without a report (left in place).\n",
				res.Messages, res.Aggregate, res.Failure, res.TLS, res.Quarantined, res.NotReports)
			for _, e := range res.Errors {
				fmt.Fprintf(g.stdout, "error: %s\n", e)
			}
			if len(res.Errors) > 0 {
				return errors.New("the poll did not complete")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (required)")
	_ = cmd.MarkFlagRequired("org")
	return cmd
}

// openMailboxes is openAdmin for the mailbox commands: without a server it
// opens the database and the secret key itself, with o's policy.
func (g *globalOptions) openMailboxes(ctx context.Context, o imapOptions) (admin.Mailboxes, func(), error) {
	if c, err := admin.Dial(ctx, g.socketPath()); err == nil {
		return c, c.Close, nil
	}
	if err := g.requireDatabase(); err != nil {
		return nil, nil, err
	}
	db, err := g.openStore(false)
	if err != nil {
		return nil, nil, err
	}
	box, err := secret.LoadOrCreate(secret.KeyPath(g.DataDir))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("mailbox credentials key: %w", err)
	}
	opts := &imapin.Options{AllowPrivate: o.AllowPrivate, AllowPlaintext: o.AllowPlaintext, Timeout: 30 * time.Second}
	if o.CAFile != "" {
		if opts.RootCAs, err = egress.LoadCAFile(o.CAFile); err != nil {
			db.Close()
			return nil, nil, usagef("--imap-ca-file: %v", err)
		}
	}
	a := app.New(app.Config{Store: db, Mailboxes: &imapin.Intake{DB: db, Box: box, Options: opts}})
	return &admin.Local{DB: db, App: a}, func() { db.Close() }, nil
}
