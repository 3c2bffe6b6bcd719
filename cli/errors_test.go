package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/duration"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// TestErrorsSayWhatToDo ensures each of these mistakes gets a message that
// names the fix, and the exit code its kind (2: called wrongly, 1: failed).
func TestErrorsSayWhatToDo(t *testing.T) {
	dir := newDataDir(t)
	dd := "--data-dir=" + dir
	missing := filepath.Join(t.TempDir(), "nope", "b.db")
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		want []string
	}{
		{"restore of a missing file", []string{"--data-dir", t.TempDir(), "restore", missing}, nil, 1,
			[]string{"no such file: " + missing}},
		{"backup into a missing folder", []string{dd, "backup", missing}, nil, 1,
			[]string{"folder " + filepath.Dir(missing) + " does not exist", "mkdir -p"}},
		{"backup onto a folder", []string{dd, "backup", t.TempDir()}, nil, 1, []string{"is a folder", "dmarcd-backup.db"}},
		{"webhook verify without its secret", []string{"webhook", "verify", "--timestamp", "1", "--signature", "sha256=00"}, nil, 2,
			[]string{"--secret", "DMARCD_SECRET"}},
		{"keys create without --org", []string{dd, "keys", "create", "--name", "x"}, nil, 2, []string{"--org", "DMARCD_ORG"}},
		{"unknown subcommand", []string{"org", "frobnicate"}, nil, 2, []string{`unknown command "frobnicate"`, "create"}},
		{"unknown command", []string{"frobnicate"}, nil, 2, []string{`unknown command "frobnicate"`, "serve"}},
		{"a duration in weeks", []string{"serve", "--data-dir", t.TempDir(), "--retention", "2w"}, nil, 2,
			[]string{"--retention", "400d"}},
		{"a duration in weeks from the environment", []string{"serve", "--data-dir", t.TempDir()},
			map[string]string{"DMARCD_RETENTION": "2w"}, 2, []string{"DMARCD_RETENTION", "400d"}},
		{"check-dmarc --dns-timeout zero", []string{"check-dmarc", "--dns-timeout", "0s", "example.com"}, nil, 2,
			[]string{"--dns-timeout"}},
		{"keys revoke of an unknown prefix", []string{dd, "keys", "revoke", "dmk_0000"}, nil, 1, []string{"no API key has the prefix dmk_0000"}},
		{"keys revoke of nonsense", []string{dd, "keys", "revoke", "bob"}, nil, 1, []string{"8-character prefix", "keys list"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := run(t, c.env, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s", code, c.code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestKeysRevokeByPrefix ensures the 8-character prefix 'keys list' shows
// revokes its key.
func TestKeysRevokeByPrefix(t *testing.T) {
	dir := newDataDir(t)
	dd := "--data-dir=" + dir
	code, out, errOut := run(t, nil, dd, "keys", "create", "--org", "acme", "--name", "ci", "--json")
	if code != 0 {
		t.Fatal(errOut)
	}
	prefix := out[strings.Index(out, "dmk_") : strings.Index(out, "dmk_")+8]
	if code, out, errOut := run(t, nil, dd, "keys", "revoke", prefix+"…"); code != 0 || !strings.Contains(out, "Revoked") {
		t.Fatalf("revoke %s: %d %s %s", prefix, code, out, errOut)
	}
	if _, out, _ := run(t, nil, dd, "keys", "list", "--org", "acme"); !strings.Contains(out, "revoked") {
		t.Errorf("not revoked:\n%s", out)
	}
}

// TestImportOrgNamesTheOwner ensures an import limited with --org to an
// organization that has not registered the report's domain says which
// organization has, and how to import into it.
func TestImportOrgNamesTheOwner(t *testing.T) {
	dir := newDataDir(t) // acme owns example.com
	db, err := (&globalOptions{DataDir: dir}).openStore(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateOrganization("globex", store.PlanUnlimited); err != nil {
		t.Fatal(err)
	}
	db.Close()
	file := filepath.Join(t.TempDir(), "r.xml")
	if err := os.WriteFile(file, reportgen.Generate(1, 3, reportgen.Options{Domain: "example.com"}), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, errOut := run(t, nil, "--data-dir="+dir, "import", "--org", "globex", file)
	if all := out + errOut; !strings.Contains(all, "registered in organization acme") || !strings.Contains(all, "--org acme") {
		t.Errorf("import --org globex of an acme report does not name acme:\n%s", all)
	}
}

// TestCheckDMARCDNSTimeout ensures check-dmarc takes --dns-timeout as serve
// does, and asks the server given.
func TestCheckDMARCDNSTimeout(t *testing.T) {
	ns := dnstest.Start(t)
	ns.AddTXT("_dmarc.example.com", "v=DMARC1; p=reject")
	code, out, errOut := run(t, nil, "check-dmarc", "--dns-server", ns.Addr, "--dns-timeout", "500ms", "example.com")
	if code != 0 || !strings.Contains(out, "p=reject") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestCheckDMARCShowsRecordAsPublished ensures check-dmarc prints a TXT
// record's text as published (issue 24 item 11): a quote is a quote, not
// the zone-file \" of miekg/dns.
func TestCheckDMARCShowsRecordAsPublished(t *testing.T) {
	ns := dnstest.Start(t)
	ns.AddTXT("_dmarc.example.com", `v=DMARC1; p=reject; x-note="ops"`)
	code, out, errOut := run(t, nil, "check-dmarc", "--dns-server", ns.Addr, "example.com")
	if code != 0 || !strings.Contains(out, `x-note="ops"`) || strings.Contains(out, `\"`) {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// TestDurationFlagsTakeDays ensures every duration flag of every command
// reads days ("400d"): all go through durationVar.
func TestDurationFlagsTakeDays(t *testing.T) {
	root := newRootCommand(&globalOptions{})
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			switch f.Value.Type() {
			case "duration", "durationSlice":
				n++
				_, one := f.Value.(*duration.Value)
				_, list := f.Value.(*duration.SliceValue)
				if !one && !list {
					t.Errorf("%s --%s is a plain pflag duration: define it with durationVar so it takes days", c.CommandPath(), f.Name)
				}
				if err := f.Value.Set("2d"); err != nil {
					t.Errorf("%s --%s 2d: %v", c.CommandPath(), f.Name, err)
				}
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 10 {
		t.Errorf("found only %d duration flags", n)
	}
}

// TestPermissionHint ensures a permission error on the data directory says
// a server may run there and names its user.
func TestPermissionHint(t *testing.T) {
	dir := t.TempDir()
	g := &globalOptions{DataDir: dir}
	err := g.permissionHint(fmt.Errorf("dial unix %s/dmarcd.sock: %w", dir, fs.ErrPermission))
	owner := ownerOf(dir)
	if owner == "" {
		t.Fatal("no owner found for a temporary directory")
	}
	for _, want := range []string{"a dmarcd server may be running", "run this command as that user", "sudo -u " + owner} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("the cause is lost: %v", err)
	}
}

// TestOrgRenameDeleteCreate ensures org create without --plan names the
// plan it chose, rename keeps the id, and delete needs --yes without a
// terminal and then removes the organization with its keys.
func TestOrgRenameDeleteCreate(t *testing.T) {
	dir := newDataDir(t)
	dd := "--data-dir=" + dir
	code, out, errOut := run(t, nil, dd, "org", "create", "globex")
	if code != 0 || !strings.Contains(out, "No --plan given: chose unlimited") {
		t.Fatalf("org create: %d %s %s", code, out, errOut)
	}
	if code, out, _ := run(t, nil, dd, "org", "create", "initech", "--plan", "starter"); code != 0 || strings.Contains(out, "No --plan") {
		t.Errorf("org create --plan: %d %s", code, out)
	}
	if code, out, errOut := run(t, nil, dd, "org", "rename", "globex", "Globex Corp"); code != 0 || !strings.Contains(out, `"Globex Corp"`) {
		t.Fatalf("rename: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := run(t, nil, dd, "org", "rename", "globex corp", "acme"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Errorf("rename onto acme: %d %s", code, errOut)
	}
	run(t, nil, dd, "keys", "create", "--org", "acme", "--name", "ci")
	if code, _, errOut := run(t, nil, dd, "org", "delete", "acme"); code != 2 || !strings.Contains(errOut, "--yes") {
		t.Errorf("delete without --yes and no terminal: %d %s", code, errOut)
	}
	code, out, errOut = run(t, nil, dd, "org", "delete", "acme", "--yes", "--json")
	var del struct {
		Domains int `json:"domains"`
		Keys    int `json:"api_keys"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &del) != nil || del.Domains != 1 || del.Keys != 1 {
		t.Fatalf("delete: %d %s %s", code, out, errOut)
	}
	if _, out, _ := run(t, nil, dd, "org", "list"); strings.Contains(out, "acme") || !strings.Contains(out, "Globex Corp") {
		t.Errorf("org list after delete:\n%s", out)
	}
	if code, _, errOut := run(t, nil, dd, "org", "delete", "acme", "--yes"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("second delete: %d %s", code, errOut)
	}
}
