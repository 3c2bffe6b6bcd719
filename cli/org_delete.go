package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/store"
)

func newOrgRenameCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "rename ORG NEW_NAME",
		Short: "Rename an organization (ORG is its name or id)",
		Long: `Give an organization a new name. Its id, keys, domains and data stay; commands
taking --org accept the new name at once (and the id, as always).`,
		Example: `  dmarcd org rename acme "Acme Corp"`,
		Args:    exactArgs(2, "ORG and NEW_NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			svc, done, err := g.openAdmin(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			org, err := svc.RenameOrganization(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g.stdout, org)
			}
			fmt.Fprintf(g.stdout, "Organization %s is now named %q.\n", org.ID, org.Name)
			return nil
		},
	}
}

type orgDeleteOptions struct{ Yes bool }

func newOrgDeleteCommand(g *globalOptions) *cobra.Command {
	var o orgDeleteOptions
	cmd := &cobra.Command{
		Use:   "delete ORG",
		Short: "Delete an organization with its domains, reports, keys and webhooks",
		Long: `Delete an organization (ORG is its name or id) with everything it owns: its API
keys (first, so they stop working at once), webhooks, domains with their
aggregate and failure reports, statistics and alerts, and its quarantine
entries. Mail to its reporting addresses is refused from then on. This
cannot be undone; take a 'dmarcd backup' first if in doubt.

It asks for the organization's name to confirm; without a terminal, or to
skip the question, pass --yes. An interrupted delete leaves the
organization with part of its data; run it again to finish.`,
		Example: `  dmarcd org delete acme
  dmarcd org delete acme --yes`,
		Args: exactArgs(1, "the ORG to delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOrgDelete(cmd.Context(), g, o, args[0], cmd.InOrStdin())
		},
	}
	cmd.Flags().BoolVar(&o.Yes, "yes", false, "delete without asking")
	return cmd
}

func runOrgDelete(ctx context.Context, g *globalOptions, o orgDeleteOptions, ref string, stdin io.Reader) error {
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if !o.Yes {
		orgs, err := svc.ListOrganizations(ctx)
		if err != nil {
			return err
		}
		var org *store.Organization
		for _, x := range orgs {
			if strings.EqualFold(x.Name, ref) || strings.EqualFold(x.ID, ref) {
				org = x
			}
		}
		if org == nil {
			return fmt.Errorf("organization %q not found (dmarcd org list shows them)", ref)
		}
		if !isTerminal(stdin) {
			return usagef("org delete %s: confirm with --yes (standard input is no terminal to ask on)", ref)
		}
		fmt.Fprintf(g.stderr, "This deletes organization %q (id %s) with all its domains, reports, keys and webhooks, for good.\nType its name to confirm: ", org.Name, org.ID)
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		if !strings.EqualFold(strings.TrimSpace(line), org.Name) {
			return fmt.Errorf("not confirmed: nothing deleted")
		}
	}
	del, err := svc.DeleteOrganization(ctx, ref)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, del)
	}
	fmt.Fprintf(g.stdout, "Deleted organization %q (id %s): %d domains with their reports, %d API keys, %d webhooks, %d quarantine entries.\n",
		del.Organization.Name, del.Organization.ID, del.Domains, del.Keys, del.Webhooks, del.Quarantined)
	return nil
}
