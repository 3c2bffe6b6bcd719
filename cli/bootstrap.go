package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/dmarcd/dmarcd/app"
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
	terminal := isTerminal(g.stdout)
	path := filepath.Join(g.DataDir, bootstrapKeyFile)
	var keyFile *os.File
	if !terminal {
		// Made before the key, so that a file left from an earlier
		// database stops the start before a key exists that nobody sees.
		keyFile, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists (the first key of an earlier database?): read it if you need it, delete it, and start again", path)
		}
		if err != nil {
			return fmt.Errorf("creating %s for the first API key: %w", path, err)
		}
		defer keyFile.Close()
	}
	org, err := db.CreateOrganization("default", app.DefaultPlan)
	if err != nil {
		removeUnwritten(keyFile, path)
		return err
	}
	key, secret, err := db.CreateAPIKey(org.ID, "bootstrap", store.ScopeFull)
	if err != nil {
		removeUnwritten(keyFile, path)
		return err
	}
	host := apiAddr
	if h, p, err := net.SplitHostPort(apiAddr); err == nil && net.ParseIP(h).IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	if terminal {
		log.Info("empty database: created organization default and its first API key", "org_id", org.ID, "key_prefix", key.Prefix)
		return printBootstrap(g, org, secret, host)
	}
	if _, err := io.WriteString(keyFile, secret+"\n"); err != nil {
		return fmt.Errorf("writing the first API key to %s: %w", path, err)
	}
	if err := errors.Join(keyFile.Sync(), keyFile.Close()); err != nil {
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

// removeUnwritten removes the key file made for a key that was not
// created.
func removeUnwritten(f *os.File, path string) {
	if f != nil {
		f.Close()
		os.Remove(path)
	}
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
