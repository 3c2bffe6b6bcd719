// Package cli holds dmarcd's commands. Each command has a constructor that
// declares its flags and a run function that does the work, so tests can
// drive either. Configuration flows one way: flags, then DMARCD_* variables
// for flags left unset, into option structs passed down; nothing global.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dmarcd/dmarcd/internal/buildinfo"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/dmarcd/dmarcd/cli.Version=v1.2.3".
var Version = ""

// Exit codes, documented in the root command's help.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	DataDir string
	JSON    bool
	stdout  io.Writer
	stderr  io.Writer
}

func (g *globalOptions) dbPath() string     { return filepath.Join(g.DataDir, "dmarcd.db") }
func (g *globalOptions) socketPath() string { return filepath.Join(g.DataDir, "dmarcd.sock") }

// usageError marks errors in how a command was called (exit code 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// NewRootCommand returns the dmarcd command, every subcommand added, reading
// stdin and writing to stdout and stderr. Run it with ExecuteContext (after
// SetArgs) and turn its error into the process exit code with ExitCode.
func NewRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := newRootCommand(&globalOptions{stdout: stdout, stderr: stderr})
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root
}

// ExitCode reports err, the error of running root (NewRootCommand), on
// root's error output, as JSON when --json was given, and returns the
// process exit code: ExitOK for nil, ExitUsage for a command called
// wrongly, ExitError otherwise.
func ExitCode(root *cobra.Command, err error) int {
	if err == nil {
		return ExitOK
	}
	stderr := root.ErrOrStderr()
	if jsonOut, _ := root.PersistentFlags().GetBool("json"); jsonOut {
		msg, _ := json.Marshal(map[string]string{"error": err.Error()})
		fmt.Fprintln(stderr, string(msg))
	} else {
		fmt.Fprintln(stderr, "dmarcd:", err)
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "Run 'dmarcd --help' (or the command with --help) for usage.")
		return ExitUsage
	}
	return ExitError
}

// requiredAnnotation marks a flag that must be given (see requireFlags).
const requiredAnnotation = "dmarcd-required"

// requireFlags marks flags of cmd as required. Unlike cobra's
// MarkFlagRequired, the check runs after the environment has been read (so
// DMARCD_<FLAG> satisfies it) and fails with a usageError naming both.
func requireFlags(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		if err := cmd.Flags().SetAnnotation(name, requiredAnnotation, []string{"true"}); err != nil {
			panic(err)
		}
	}
}

// checkRequired returns a usageError for each required flag left unset.
func checkRequired(cmd *cobra.Command) error {
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if len(f.Annotations[requiredAnnotation]) > 0 && !f.Changed {
			missing = append(missing, fmt.Sprintf("--%s (or the environment variable %s)", f.Name, envName(f.Name)))
		}
	})
	if len(missing) > 0 {
		return usagef("%s needs %s", cmd.CommandPath(), strings.Join(missing, " and "))
	}
	return nil
}

// typeUsageErrors makes cobra's own usage errors usageErrors, so the exit
// code never depends on their wording: every command with subcommands
// refuses an unknown one itself (cobra's check returns an untyped error),
// and flag errors go through the root's SetFlagErrorFunc.
func typeUsageErrors(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usagef("unknown command %q for %q; the commands are: %s", args[0], cmd.CommandPath(), subcommandNames(cmd))
		}
	}
	for _, sub := range c.Commands() {
		typeUsageErrors(sub)
	}
}

func subcommandNames(c *cobra.Command) string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return strings.Join(names, ", ")
}

func newRootCommand(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "dmarcd",
		Short: "Self-hosted DMARC monitoring: report intake, statistics, alerts and a REST API",
		Long: `dmarcd receives DMARC aggregate and failure reports by mail, stores them in
one embedded database file, and serves them through a web interface and an
API-key REST API.

Start the service with 'dmarcd serve'. On first start it creates the
organization "default" and prints its first API key: open the web interface
at http://127.0.0.1:8080/ (the --listen address) and sign in with that key.
Add the domains to monitor with 'dmarcd domain add', and administer
organizations and keys with 'dmarcd org' and 'dmarcd keys': while a server
runs these commands go through its admin socket (<data-dir>/dmarcd.sock),
otherwise they open the database file directly.

Every command takes --data-dir (env DMARCD_DATA_DIR, default ./data) and
--json for machine-readable output.

Exit codes:
  0  success
  1  the command failed (the message says why)
  2  the command was called wrongly (unknown flag, missing argument)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().StringVar(&g.DataDir, "data-dir", "./data", "directory of the database file and admin socket (env DMARCD_DATA_DIR)")
	root.PersistentFlags().BoolVar(&g.JSON, "json", false, "print machine-readable JSON instead of text")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := bindEnv(cmd); err != nil {
			return err
		}
		return checkRequired(cmd)
	}
	root.AddCommand(
		newServeCommand(g),
		newOrgCommand(g),
		newKeysCommand(g),
		newDomainCommand(g),
		newImportCommand(g),
		newQuarantineCommand(g),
		newCheckDMARCCommand(g),
		newCheckTLSCommand(g),
		newSendersCommand(g),
		newBackupCommand(g),
		newCompactCommand(g),
		newRestoreCommand(g),
		newWebhookCommand(g),
		newMailboxCommand(g),
		newMailCommand(g),
		newExportCommand(g),
		newDigestCommand(g),
		newVersionCommand(g),
		newReportsCommand(g),
	)
	typeUsageErrors(root)
	return root
}

// bindEnv fills every flag the user did not set from DMARCD_<FLAG> (upper
// case, dashes as underscores), the one place where the environment is read.
// List flags take comma-separated values. A deprecated alias (see
// deprecatedAlias) is read after its flag and only when neither was set:
// the new name wins, and the old one warns on stderr.
func bindEnv(cmd *cobra.Command) error {
	var err error
	// Flags set on the command line through their alias.
	viaAlias := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if to := aliasTarget(f); to != "" && f.Changed {
			viaAlias[to] = true
		}
	})
	set := func(f *pflag.Flag) {
		if err != nil || f.Changed || viaAlias[f.Name] || f.Name == "help" {
			return
		}
		to := aliasTarget(f)
		if to != "" {
			if t := cmd.Flags().Lookup(to); t != nil && t.Changed {
				return
			}
		}
		name := envName(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if sv, isSlice := f.Value.(pflag.SliceValue); isSlice {
			err = sv.Replace(splitList(v))
		} else {
			err = f.Value.Set(v)
		}
		if err != nil {
			err = usagef("environment variable %s: %v", name, err)
			return
		}
		f.Changed = true
		if to != "" {
			fmt.Fprintf(cmd.ErrOrStderr(), "environment variable %s is deprecated, use %s\n", name, envName(to))
		}
	}
	pass := func(aliases bool) func(*pflag.Flag) {
		return func(f *pflag.Flag) {
			if (aliasTarget(f) != "") == aliases {
				set(f)
			}
		}
	}
	cmd.Flags().VisitAll(pass(false))
	cmd.InheritedFlags().VisitAll(pass(false))
	cmd.Flags().VisitAll(pass(true))
	return err
}

func envName(flag string) string {
	return "DMARCD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// aliasOf is the annotation of a deprecated alias naming its flag.
const aliasOf = "dmarcd-alias-of"

// deprecatedAlias makes flag old of fs a deprecated alias of flag name,
// which must set the same variable: old keeps working on the command line
// (pflag warns and hides it from help) and as DMARCD_<OLD> (bindEnv
// warns), and name wins over it in the environment.
func deprecatedAlias(fs *pflag.FlagSet, old, name string) {
	if err := fs.SetAnnotation(old, aliasOf, []string{name}); err != nil {
		panic(err)
	}
	if err := fs.MarkDeprecated(old, "use --"+name); err != nil {
		panic(err)
	}
}

// aliasTarget is the flag f is a deprecated alias of, or "".
func aliasTarget(f *pflag.Flag) string {
	if to := f.Annotations[aliasOf]; len(to) == 1 {
		return to[0]
	}
	return ""
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// version is the -ldflags version, else the module version, else "dev".
func version() string { return buildinfo.Read(Version).Version }

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// notExist explains a missing database: only serve and restore create one,
// so that a mistyped --data-dir does not silently start an empty database.
func (g *globalOptions) requireDatabase() error {
	if _, err := os.Stat(g.dbPath()); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no database at %s: start 'dmarcd serve --data-dir %s' once to create it, or pass the --data-dir of your installation", g.dbPath(), g.DataDir)
	}
	return nil
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d argument(s)", names, len(args))
		}
		return nil
	}
}
