package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

func newOrgCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "org",
		Short: "Create, list, rename and delete organizations, and change their plans",
		Long: `An organization owns domains, reports, alerts and API keys; an API key sees
only its own organization. A self-hoster usually needs just the "default"
organization that 'dmarcd serve' creates; an MSP creates one per customer.

Plans set what an organization may do:
  starter     3 domains, no failure reports, no webhooks
  business    50 domains, failure reports, up to 10 webhooks
  unlimited   no domain limit, failure reports, up to 25 webhooks`,
	}
	cmd.AddCommand(newOrgCreateCommand(g), newOrgListCommand(g), newOrgSetPlanCommand(g),
		newOrgRenameCommand(g), newOrgDeleteCommand(g))
	return cmd
}

type orgCreateOptions struct {
	Plan      string
	planGiven bool
}

func newOrgCreateCommand(g *globalOptions) *cobra.Command {
	var o orgCreateOptions
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an organization",
		Example: `  dmarcd org create acme --plan business
  dmarcd keys create --org acme --name "acme dashboard"`,
		Args: exactArgs(1, "the organization NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.planGiven = cmd.Flags().Changed("plan")
			return runOrgCreate(cmd.Context(), g, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.Plan, "plan", string(app.DefaultPlan), "plan: starter, business or unlimited (without it: unlimited, and the output says so)")
	return cmd
}

func runOrgCreate(ctx context.Context, g *globalOptions, o orgCreateOptions, name string) error {
	plan, err := store.ParsePlan(o.Plan)
	if err != nil {
		return usageError{err}
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	org, err := svc.CreateOrganization(ctx, name, plan)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, org)
	}
	fmt.Fprintf(g.stdout, "Created organization %q (id %s, plan %s).\n", org.Name, org.ID, org.Plan)
	if !o.planGiven {
		fmt.Fprintf(g.stdout, "No --plan given: chose %s (%s). Change it with: %s org set-plan %s PLAN\n",
			org.Plan, app.PlanSummary(org.Plan), commandName(), shellQuote(org.Name))
	}
	fmt.Fprintf(g.stdout, "Create its first API key with:\n  %s keys create --org %s --name NAME\n", commandName(), shellQuote(org.Name))
	return nil
}

func newOrgListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List organizations",
		Example: "  dmarcd org list\n  dmarcd org list --json",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrgList(cmd.Context(), g)
		},
	}
}

func runOrgList(ctx context.Context, g *globalOptions) error {
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	orgs, err := svc.ListOrganizations(ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		if orgs == nil {
			orgs = []*store.Organization{}
		}
		return printJSON(g.stdout, orgs)
	}
	tw := newTable(g.stdout, "ID", "NAME", "PLAN", "CREATED")
	for _, o := range orgs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.ID, o.Name, o.Plan, o.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func newOrgSetPlanCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "set-plan ORG PLAN",
		Short: "Change the plan of an organization (ORG is its name or id)",
		Long: `Change the plan of an organization. ORG is its name or id; PLAN is starter,
business or unlimited. Lowering a plan never deletes data: domains past the
new limit stay, but no new ones can be added until the count is under it.`,
		Example: "  dmarcd org set-plan acme business",
		Args:    exactArgs(2, "ORG and PLAN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOrgSetPlan(cmd.Context(), g, args[0], args[1])
		},
	}
}

func runOrgSetPlan(ctx context.Context, g *globalOptions, ref, planName string) error {
	plan, err := store.ParsePlan(planName)
	if err != nil {
		return usageError{err}
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	org, err := svc.SetOrganizationPlan(ctx, ref, plan)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, org)
	}
	fmt.Fprintf(g.stdout, "Organization %q is now on plan %s.\n", org.Name, org.Plan)
	return nil
}

func newTable(w io.Writer, headers ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, h := range headers {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, h)
	}
	fmt.Fprintln(tw)
	return tw
}
