package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/dmarcd/dmarcd/store"
)

// bootstrapKeyFile is where the first API key goes when standard output is
// no terminal (a journal, a pipe, a file): logs must never hold it.
const bootstrapKeyFile = "bootstrap-key"

// bootstrap creates the organization "default" and its first key on an
// empty database. On a terminal the key is printed once, with a line to
// try it; otherwise it is written to <data-dir>/bootstrap-key (mode 0600)
// and only that path is printed and logged, never the key.
func bootstrap(db *store.DB, g *globalOptions, apiAddr string, log *slog.Logger) error {
	n, err := db.CountOrganizations()
	if err != nil || n > 0 {
		return err
	}
	org, err := db.CreateOrganization("default", store.PlanUnlimited)
	if err != nil {
		return err
	}
	key, secret, err := db.CreateAPIKey(org.ID, "bootstrap", store.ScopeFull)
	if err != nil {
		return err
	}
	host := apiAddr
	if h, p, err := net.SplitHostPort(apiAddr); err == nil && net.ParseIP(h).IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	if isTerminal(g.stdout) {
		log.Info("empty database: created organization default and its first API key", "org_id", org.ID, "key_prefix", key.Prefix)
		return printBootstrap(g, org, secret, host)
	}
	path := filepath.Join(g.DataDir, bootstrapKeyFile)
	if err := writeSecretFile(path, secret+"\n"); err != nil {
		return fmt.Errorf("writing the first API key to %s: %w", path, err)
	}
	log.Info("empty database: created organization default and its first API key", "org_id", org.ID,
		"key_prefix", key.Prefix, "key_file", path)
	if g.JSON {
		return printJSON(g.stdout, map[string]string{"organization": org.Name, "organization_id": org.ID, "api_key_file": path})
	}
	fmt.Fprintf(g.stdout, `
dmarcd: this is a new database. Created organization "default" (plan unlimited)
and its first API key. Standard output is no terminal, so the key is not
shown here but written to %[1]s (readable by this user only).
Read it, store it elsewhere, then delete the file:

    cat %[1]s && rm %[1]s

Try it:

    curl -H "X-API-Key: $(cat %[1]s)" http://%[2]s/api/v1/domains

`, path, host)
	return nil
}

// printBootstrap shows the first key on a terminal, once.
func printBootstrap(g *globalOptions, org *store.Organization, secret, host string) error {
	if g.JSON {
		return printJSON(g.stdout, map[string]string{"organization": org.Name, "organization_id": org.ID, "api_key": secret})
	}
	dataDir := ""
	if g.DataDir != "./data" {
		dataDir = " --data-dir " + shellQuote(g.DataDir)
	}
	fmt.Fprintf(g.stdout, `
dmarcd: this is a new database. Created organization "default" (plan unlimited)
and its first API key. The key is shown only this once; store it now:

    %s

Try it:

    curl -H 'X-API-Key: %s' http://%s/api/v1/domains

More keys: %s keys create --org default --name NAME%s

`, secret, secret, host, commandName(), dataDir)
	return nil
}

// writeSecretFile creates path with mode 0600 and writes s; an existing file
// is an error, so an old key is never overwritten nor a symlink followed.
func writeSecretFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, s)
	return errors.Join(err, f.Sync(), f.Close())
}

// commandName is how the user started dmarcd, for hints they can paste:
// "go run ." under go run (whose binary lives in a temporary build
// directory), else the program name as given ("./dmarcd", "dmarcd").
func commandName() string {
	arg0 := os.Args[0]
	if strings.Contains(filepath.ToSlash(arg0), "/go-build") {
		return "go run ."
	}
	if filepath.Base(arg0) == arg0 {
		return arg0 // found in PATH
	}
	return shellQuote(arg0)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '+' || r == '=' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
