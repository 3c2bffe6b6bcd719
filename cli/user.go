package cli

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/app"
)

// 'dmarcd user': the people of an organization (docs/people.md), run as
// the operator through the admin socket of a running server, or on the
// database file without one.

func newUserCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Invite, list and remove the people who sign in to the web interface",
		Long: `People sign in to the web interface with their email and a password (and a
TOTP code once they enrolled one), or with single sign-on. Each belongs to
organizations with one role in each:

  owner   everything, including people, the plan and deleting the organization
  admin   domains, webhooks, mailboxes, API keys, alerts
  viewer  reads only

'user add' prints a one-time link (good for 7 days) that sets the person's
password and signs them in; 'user reset' prints a password-reset link (24
hours) and signs the person out everywhere. Changing a role or removing a
member signs them out at once. An organization keeps at least one owner.

The first start makes organization "default" and an API key; make its first
owner with 'dmarcd user add you@example.com --org default --role owner'.`,
	}
	cmd.AddCommand(newUserAddCommand(g), newUserListCommand(g), newUserRemoveCommand(g),
		newUserResetCommand(g), newUserRoleCommand(g))
	return cmd
}

type userAddOptions struct {
	Org, Role, PublicURL string
}

func newUserAddCommand(g *globalOptions) *cobra.Command {
	var o userAddOptions
	cmd := &cobra.Command{
		Use:   "add EMAIL --org ORG --role owner|admin|viewer",
		Short: "Add a person to an organization and print their one-time invitation link",
		Long: `Add the person of EMAIL to the organization with a role, creating their
account when they have none, and print the one-time link that lets them set
a password and sign in, on a line of its own:

    <public-url>/invite/<token>

The link is good for 7 days and works once. Through a running server the
link starts with the server's --public-url (or its --listen address);
without one, with --public-url.`,
		Example: `  dmarcd user add owner@example.com --org default --role owner
  dmarcd user add client@example.org --org acme --role viewer`,
		Args: exactArgs(1, "the EMAIL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUserAdd(cmd.Context(), g, args[0], o)
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (default: the only one)")
	cmd.Flags().StringVar(&o.Role, "role", "viewer", "owner, admin or viewer")
	cmd.Flags().StringVar(&o.PublicURL, "public-url", "", "without a server: the server's --public-url, for the link (default http://127.0.0.1:8080)")
	return cmd
}

func runUserAdd(ctx context.Context, g *globalOptions, email string, o userAddOptions) error {
	if _, err := app.ParseRole(o.Role); err != nil {
		return usagef("--role must be owner, admin or viewer, not %q", o.Role)
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	u, err := svc.AddUser(ctx, o.Org, email, o.Role)
	if err != nil {
		return err
	}
	return printLink(g, u, o.PublicURL, fmt.Sprintf("Added %s to organization %s as %s. Send them this link (good for 7 days, once):", u.Email, u.Organization, u.Role))
}

// printLink prints what user add and user reset answer: the link on a
// line of its own (or the JSON with it).
func printLink(g *globalOptions, u *admin.AddedUser, publicURL, intro string) error {
	if u.Link == "" {
		u.Link = webURL("127.0.0.1:8080", publicURL) + "/invite/" + u.Token
	}
	if g.JSON {
		return printJSON(g.stdout, u)
	}
	fmt.Fprintf(g.stdout, "%s\n\n%s\n\n", intro, u.Link)
	return nil
}

// webURL is the web interface's URL: publicURL, else http:// and the
// listen address (an unspecified host as loopback); no trailing slash.
func webURL(listen, publicURL string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/")
	}
	host := listen
	if h, p, err := net.SplitHostPort(listen); err == nil && (h == "" || net.ParseIP(h).IsUnspecified()) {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	return "http://" + host
}

func newUserListCommand(g *globalOptions) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:     "list [--org ORG]",
		Short:   "List the people of an organization (of all, without --org)",
		Example: "  dmarcd user list --org default",
		Args:    exactArgs(0, "no arguments (use --org)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			us, err := svc.ListUsers(cmd.Context(), org)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, us)
			}
			tw := newTable(g.stdout, "ID", "EMAIL", "ROLE", "ORGANIZATION", "STATUS", "CREATED", "LAST SIGN-IN", "TOTP")
			for _, u := range us {
				totp, status := "off", "active"
				if u.TOTP {
					totp = "on"
				}
				if u.Pending {
					status = "invited"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.ID, u.Email, u.Role, u.Organization, status,
					u.CreatedAt.Format(time.RFC3339), timeOrNever(u.LastSignInAt), totp)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organization name or id (default: every one)")
	return cmd
}

func newUserRemoveCommand(g *globalOptions) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:   "remove EMAIL|ID [--org ORG]",
		Short: "Remove a person from an organization and sign them out",
		Long: `Remove the member named by their email or member id from the organization
(their account stays, with their other organizations). Their sessions end at
once. The last owner cannot be removed.`,
		Example: "  dmarcd user remove client@example.org --org acme",
		Args:    exactArgs(1, "the member's EMAIL or ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			u, err := svc.RemoveUser(cmd.Context(), org, args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, u)
			}
			fmt.Fprintf(g.stdout, "Removed %s from organization %s.\n", u.Email, u.Organization)
			return nil
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organization name or id (default: the only one)")
	return cmd
}

func newUserResetCommand(g *globalOptions) *cobra.Command {
	var org, publicURL string
	cmd := &cobra.Command{
		Use:   "reset EMAIL|ID [--org ORG]",
		Short: "Print a one-time password-reset link for a person and sign them out",
		Long: `Print a one-time link (good for 24 hours, once) that sets a new password for
the member and signs them in; their sessions end now. Their old password
works until the link is used.`,
		Example: "  dmarcd user reset client@example.org --org acme",
		Args:    exactArgs(1, "the member's EMAIL or ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			u, err := svc.ResetUser(cmd.Context(), org, args[0])
			if err != nil {
				return err
			}
			return printLink(g, u, publicURL, fmt.Sprintf("Password reset for %s (signed out everywhere). Send them this link (good for 24 hours, once):", u.Email))
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organization name or id (default: the only one)")
	cmd.Flags().StringVar(&publicURL, "public-url", "", "without a server: the server's --public-url, for the link (default http://127.0.0.1:8080)")
	return cmd
}

func newUserRoleCommand(g *globalOptions) *cobra.Command {
	var org string
	cmd := &cobra.Command{
		Use:     "role EMAIL|ID owner|admin|viewer [--org ORG]",
		Short:   "Change a person's role in an organization and sign them out",
		Example: "  dmarcd user role client@example.org admin --org acme",
		Args:    exactArgs(2, "the member's EMAIL or ID and the ROLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := app.ParseRole(args[1]); err != nil {
				return usagef("the role must be owner, admin or viewer, not %q", args[1])
			}
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			u, err := svc.SetUserRole(cmd.Context(), org, args[0], args[1])
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, u)
			}
			fmt.Fprintf(g.stdout, "%s is now %s of organization %s.\n", u.Email, u.Role, u.Organization)
			return nil
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "organization name or id (default: the only one)")
	return cmd
}
