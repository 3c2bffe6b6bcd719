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
// empty database. On a terminal the key is shown once (see announce);
// otherwise it is written to <data-dir>/bootstrap-key (mode 0600) and only
// that path is shown and logged, never the key. It returns what to
// announce, nil when the database was not empty: serve prints it once the
// server is up, after --demo's reports, so that it is the last thing on
// the screen.
func bootstrap(db *store.DB, g *globalOptions, log *slog.Logger) (*firstKey, error) {
	n, err := db.CountOrganizations()
	if err != nil || n > 0 {
		return nil, err
	}
	terminal := isTerminal(g.stdout)
	path := filepath.Join(g.DataDir, bootstrapKeyFile)
	var keyFile *os.File
	if !terminal {
		// Made before the key, so that a file left from an earlier
		// database stops the start before a key exists that nobody sees.
		keyFile, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s already exists (the first key of an earlier database?): read it if you need it, delete it, and start again", path)
		}
		if err != nil {
			return nil, fmt.Errorf("creating %s for the first API key: %w", path, err)
		}
		defer keyFile.Close()
	}
	org, err := db.CreateOrganization("default", app.DefaultPlan)
	if err != nil {
		removeUnwritten(keyFile, path)
		return nil, err
	}
	key, secret, err := db.CreateAPIKey(org.ID, "bootstrap", store.ScopeFull)
	if err != nil {
		removeUnwritten(keyFile, path)
		return nil, err
	}
	if terminal {
		log.Info("empty database: created organization default and its first API key", "org_id", org.ID, "key_prefix", key.Prefix)
		return &firstKey{org: org, secret: secret}, nil
	}
	if _, err := io.WriteString(keyFile, secret+"\n"); err != nil {
		return nil, fmt.Errorf("writing the first API key to %s: %w", path, err)
	}
	if err := errors.Join(keyFile.Sync(), keyFile.Close()); err != nil {
		return nil, fmt.Errorf("writing the first API key to %s: %w", path, err)
	}
	log.Info("empty database: created organization default and its first API key", "org_id", org.ID,
		"key_prefix", key.Prefix, "key_file", path)
	return &firstKey{org: org, file: path}, nil
}

// firstKey is what bootstrap created, to announce: the key itself on a
// terminal (secret), else the file it went to.
type firstKey struct {
	org          *store.Organization
	secret, file string
}

// announce prints the first-start text: where the key is, the web
// interface's URL (the --public-url, else the API's address with an
// unspecified host as loopback) and a curl line to try the API. A nil k
// prints nothing.
func (k *firstKey) announce(g *globalOptions, apiAddr, publicURL string, demoLoaded bool) error {
	if k == nil {
		return nil
	}
	host := apiAddr
	if h, p, err := net.SplitHostPort(apiAddr); err == nil && net.ParseIP(h).IsUnspecified() {
		host = net.JoinHostPort("127.0.0.1", p)
	}
	webURL := "http://" + host + "/"
	if publicURL != "" {
		webURL = strings.TrimRight(publicURL, "/") + "/"
	}
	if g.JSON {
		out := map[string]string{"organization": k.org.Name, "organization_id": k.org.ID, "web_url": webURL}
		if k.file != "" {
			out["api_key_file"] = k.file
		} else {
			out["api_key"] = k.secret
		}
		return printJSON(g.stdout, out)
	}
	demoLine := ""
	if demoLoaded {
		demoLine = "The demo domain " + demoDomain + " holds two weeks of sample reports.\n"
	}
	addLine := "Add a domain to monitor: " + g.invocation() + " domain add example.com\n"
	if k.file != "" {
		_, err := fmt.Fprintf(g.stdout, `
dmarcd: this is a new database. Created organization "default" (plan unlimited)
and its first API key. Standard output is no terminal, so the key is not
shown here but written to %[1]s (readable by this user only).
Read it, store it elsewhere, then delete the file:

    cat %[1]s && rm %[1]s

Web interface: %[3]s (sign in with the key)
%[4]s%[5]s
Try it:

    curl -H "X-API-Key: $(cat %[1]s)" http://%[2]s/api/v1/domains

`, k.file, host, webURL, demoLine, addLine)
		return err
	}
	_, err := fmt.Fprintf(g.stdout, `
dmarcd: this is a new database. Created organization "default" (plan unlimited)
and its first API key. The key is shown only this once; store it now:

    %[1]s

Web interface: %[3]s (sign in with the key)
%[5]s%[6]s
Try it:

    curl -H 'X-API-Key: %[1]s' http://%[2]s/api/v1/domains

More keys: %[4]s keys create --org default --name NAME

`, k.secret, host, webURL, g.invocation(), demoLine, addLine)
	return err
}

// invocation is how to call dmarcd again in a hint the user can paste:
// the command as started, with --data-dir when it is not the default.
func (g *globalOptions) invocation() string {
	if g.DataDir == "./data" || g.DataDir == "" {
		return commandName()
	}
	return commandName() + " --data-dir " + shellQuote(g.DataDir)
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
