package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/store"
)

func newKeysCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create, list and revoke API keys",
		Long: `API keys authenticate REST API calls (header X-API-Key). A key belongs to one
organization and sees only its data. A key looks like dmk_ followed by 32
hex characters; only its SHA-256 hash and its first 8 characters are
stored, so the full key is printed once, at creation, and never again.

Scopes: "full" keys may do everything; "read" keys may only read (GET
requests and POST /api/v1/check-dmarc) and get 403 insufficient_scope on
anything that changes data.

An organization has at most 5 active keys; revoke one to make room.
Revocation takes effect at once, also in a running server, and is final.`,
	}
	cmd.AddCommand(newKeysCreateCommand(g), newKeysListCommand(g), newKeysRevokeCommand(g))
	return cmd
}

type keysCreateOptions struct {
	Org, Name, Scope string
}

func newKeysCreateCommand(g *globalOptions) *cobra.Command {
	var o keysCreateOptions
	cmd := &cobra.Command{
		Use:   "create --org ORG --name NAME [--scope full|read]",
		Short: "Create an API key and print it once",
		Example: `  dmarcd keys create --org default --name "grafana" --scope read
  KEY=$(dmarcd keys create --org default --name ci --json | jq -r .secret)`,
		Args: exactArgs(0, "no arguments (use --org and --name)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKeysCreate(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (required)")
	cmd.Flags().StringVar(&o.Name, "name", "", "what the key is for, shown in 'keys list' (required)")
	cmd.Flags().StringVar(&o.Scope, "scope", string(store.ScopeFull), "full or read")
	requireFlags(cmd, "org", "name")
	return cmd
}

func runKeysCreate(ctx context.Context, g *globalOptions, o keysCreateOptions) error {
	scope, err := store.ParseScope(o.Scope)
	if err != nil {
		return usageError{err}
	}
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	key, secret, err := svc.CreateAPIKey(ctx, o.Org, o.Name, scope)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, struct {
			*store.APIKey
			Secret string `json:"secret"`
		}{key, secret})
	}
	fmt.Fprintf(g.stdout, "Created API key %q (id %s, scope %s).\nThis is the only time the key is shown; store it now:\n\n    %s\n\n",
		key.Name, key.ID, key.Scope, secret)
	return nil
}

type keysListOptions struct{ Org string }

func newKeysListCommand(g *globalOptions) *cobra.Command {
	var o keysListOptions
	cmd := &cobra.Command{
		Use:     "list --org ORG",
		Short:   "List the keys of an organization (revoked ones too)",
		Example: "  dmarcd keys list --org default",
		Args:    exactArgs(0, "no arguments (use --org)"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKeysList(cmd.Context(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.Org, "org", "", "organization name or id (required)")
	requireFlags(cmd, "org")
	return cmd
}

func runKeysList(ctx context.Context, g *globalOptions, o keysListOptions) error {
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	keys, err := svc.ListAPIKeys(ctx, o.Org)
	if err != nil {
		return err
	}
	if g.JSON {
		if keys == nil {
			keys = []*store.APIKey{}
		}
		return printJSON(g.stdout, keys)
	}
	tw := newTable(g.stdout, "ID", "PREFIX", "NAME", "SCOPE", "CREATED", "LAST USED", "STATUS")
	for _, k := range keys {
		status := "active"
		if k.RevokedAt != nil {
			status = "revoked " + k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.Scope,
			k.CreatedAt.Format(time.RFC3339), timeOrNever(k.LastUsedAt), status)
	}
	return tw.Flush()
}

func timeOrNever(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

func newKeysRevokeCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY_ID|PREFIX",
		Short: "Revoke a key at once and for good",
		Long: `Revoke the key with id KEY_ID, or the key whose 8-character prefix
(dmk_1a2b, as 'dmarcd keys list' shows it) is PREFIX when no other key
shares it. Requests with it get
401 from that moment on, also in a running server. A revoked key cannot be
restored; create a new one instead.`,
		Example: "  dmarcd keys revoke 0193a1e2-7b4c-7d2e-9f00-1a2b3c4d5e6f\n  dmarcd keys revoke dmk_1a2b",
		Args:    exactArgs(1, "the KEY_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runKeysRevoke(cmd.Context(), g, args[0])
		},
	}
}

func runKeysRevoke(ctx context.Context, g *globalOptions, id string) error {
	svc, done, err := g.openAdmin(ctx)
	if err != nil {
		return err
	}
	defer done()
	key, err := svc.RevokeAPIKey(ctx, id)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, key)
	}
	fmt.Fprintf(g.stdout, "Revoked API key %q (%s…, id %s).\n", key.Name, key.Prefix, key.ID)
	return nil
}
