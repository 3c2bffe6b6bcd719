package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// TestDomainLifecycle ensures a newcomer's path works on the real binary:
// bootstrap key, create a domain, publish the record, verify, delete.
func TestDomainLifecycle(t *testing.T) {
	ns := dnstest.Start(t)
	s := StartServer(t, Options{DNS: ns})
	if s.Key == "" {
		t.Fatalf("no bootstrap key printed on first start\nstdout:\n%s", s.Stdout())
	}
	// Standard output is a pipe (as under systemd): the key stays out of
	// stdout and the log, in a file only its user reads.
	keyFile := filepath.Join(s.DataDir, "bootstrap-key")
	if !strings.Contains(s.Stdout(), "cat "+keyFile) {
		t.Errorf("bootstrap output does not say how to read %s:\n%s", keyFile, s.Stdout())
	}
	if strings.Contains(s.Stdout(), s.Key) || strings.Contains(s.Stderr(), s.Key) {
		t.Errorf("the bootstrap key was printed or logged with stdout a pipe")
	}
	if !strings.Contains(s.Stderr(), keyFile) {
		t.Errorf("the log does not name %s", keyFile)
	}
	if fi, err := os.Stat(keyFile); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v; want 0600", keyFile, fi.Mode())
	}

	created := s.Must(http.StatusCreated, "POST", "/api/v1/domains", s.Key, map[string]string{"name": "  Example.COM. "})
	id, _ := created["id"].(string)
	email, _ := created["reporting_email"].(string)
	if created["name"] != "example.com" || created["status"] != "pending" || created["verified_at"] != nil {
		t.Fatalf("created domain = %v", created)
	}
	if !strings.HasSuffix(email, "@reports.dmarcd.test") {
		t.Errorf("reporting_email = %q", email)
	}
	record, _ := created["dmarc_record"].(string)
	if !strings.Contains(record, "rua=mailto:"+email) || !strings.HasPrefix(record, "v=DMARC1; p=none") {
		t.Errorf("dmarc_record = %q", record)
	}
	if recs, _ := created["dns_records"].([]any); len(recs) != 3 {
		t.Errorf("dns_records = %v, want the _dmarc record, the authorization record and the TLS-RPT record", created["dns_records"])
	}

	s.Must(http.StatusConflict, "POST", "/api/v1/domains", s.Key, map[string]string{"name": "example.com"})

	r := s.Do("POST", "/api/v1/domains/"+id+"/verify", s.Key, nil)
	if r.Status != http.StatusUnprocessableEntity || r.ErrorCode(t) != "verification_failed" {
		t.Fatalf("verify without a record: %d %s", r.Status, r.Body)
	}
	ns.SetTXT("_dmarc.example.com", []string{record})
	v := s.Must(http.StatusOK, "POST", "/api/v1/domains/"+id+"/verify", s.Key, nil)
	dom, _ := v["domain"].(map[string]any)
	if v["verified"] != true || dom["status"] != "active" || dom["verified_at"] == nil {
		t.Fatalf("verify = %v", v)
	}

	list := s.Must(http.StatusOK, "GET", "/api/v1/domains", s.Key, nil)
	if data, _ := list["data"].([]any); len(data) != 1 {
		t.Fatalf("list = %v", list)
	}
	s.Must(http.StatusOK, "GET", "/api/v1/domains/"+id, s.Key, nil)
	if r := s.Do("DELETE", "/api/v1/domains/"+id, s.Key, nil); r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Fatalf("delete: %d %q", r.Status, r.Body)
	}
	s.Must(http.StatusNotFound, "GET", "/api/v1/domains/"+id, s.Key, nil)
}

// TestCheckDMARCFixtures ensures check-dmarc and verify read the DNS as
// receivers do, over every fixture shape the DNS can take, through the API
// of the real binary and through the CLI.
func TestCheckDMARCFixtures(t *testing.T) {
	ns := dnstest.Start(t)
	ns.SetTXT("_dmarc.present.test", []string{"v=DMARC1; p=reject; rua=mailto:agg@present.test"})
	ns.SetTXT("_dmarc.several.test", []string{"v=DMARC1; p=none"}, []string{"v=DMARC1; p=reject"})
	ns.SetTXT("_dmarc.split.test", []string{"v=DMARC1; p=quarantine; ", "rua=mailto:a@split.test"})
	ns.SetTXT("_dmarc.parent.test", []string{"v=DMARC1; p=reject; sp=quarantine"})
	ns.SetRcode("_dmarc.servfail.test", dns.RcodeServerFailure)
	ns.SetDrop("_dmarc.timeout.test", true)
	long := "v=DMARC1; p=reject; rua=" + strings.Repeat("mailto:x@trunc.test,", 30) + "mailto:last@trunc.test"
	ns.SetTXT("_dmarc.trunc.test", splitTXT(long))
	ns.SetTruncateUDP("_dmarc.trunc.test", true)

	s := StartServer(t, Options{DNS: ns})
	check := func(domain string) *Response {
		return s.Do("POST", "/api/v1/check-dmarc", s.Key, map[string]string{"domain": domain})
	}
	cases := []struct {
		domain    string
		status    int
		found     bool
		valid     bool
		inherited string
		p         string
	}{
		{"present.test", 200, true, true, "", "reject"},
		{"absent.test", 200, false, false, "", ""},
		{"several.test", 200, true, false, "", ""},
		{"split.test", 200, true, true, "", "quarantine"},
		{"a.b.parent.test", 200, true, true, "parent.test", "reject"},
		{"servfail.test", 503, false, false, "", ""},
		{"timeout.test", 503, false, false, "", ""},
		{"trunc.test", 200, true, true, "", "reject"},
	}
	for _, c := range cases {
		t.Run(c.domain, func(t *testing.T) {
			r := check(c.domain)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.status != 200 {
				if code := r.ErrorCode(t); code != "dns_unavailable" {
					t.Errorf("error code %q, want dns_unavailable", code)
				}
				return
			}
			m := r.JSON(t)
			if m["found"] != c.found || m["valid"] != c.valid {
				t.Errorf("found=%v valid=%v, want %v %v: %s", m["found"], m["valid"], c.found, c.valid, r.Body)
			}
			if inh, _ := m["inherited_from"].(string); inh != c.inherited {
				t.Errorf("inherited_from = %q, want %q", inh, c.inherited)
			}
			if c.p != "" {
				pol, _ := m["policy"].(map[string]any)
				if pol["p"] != c.p {
					t.Errorf("policy.p = %v, want %s", pol["p"], c.p)
				}
			}
		})
	}
	if ns.Queries("_dmarc.trunc.test") < 2 {
		t.Errorf("truncated answer was not retried over TCP")
	}

	// The CLI needs no server: it asks the DNS itself.
	out := MustCLI(t, "check-dmarc", "--dns-server", ns.Addr, "--json", "present.test")
	if !strings.Contains(out.Stdout, `"p": "reject"`) {
		t.Errorf("check-dmarc --json output:\n%s", out.Stdout)
	}
	fail := RunCLI(t, nil, "check-dmarc", "--dns-server", ns.Addr, "--timeout", "5s", "servfail.test")
	if fail.Code != 1 || !strings.Contains(fail.Stderr, "servfail.test") {
		t.Errorf("check-dmarc on SERVFAIL: exit %d, stderr %q", fail.Code, fail.Stderr)
	}
}

// splitTXT cuts s into the 255-byte character-strings a TXT record holds.
func splitTXT(s string) []string {
	var out []string
	for len(s) > 255 {
		out = append(out, s[:255])
		s = s[255:]
	}
	return append(out, s)
}

// TestKeysThroughSocketAndOffline ensures key administration works against
// a running server (through its socket, taking effect at once) and without
// one (on the file).
func TestKeysThroughSocketAndOffline(t *testing.T) {
	s := StartServer(t, Options{})
	dd := "--data-dir=" + s.DataDir

	created := MustCLI(t, dd, "keys", "create", "--org", "default", "--name", "ci", "--scope", "read", "--json")
	secret := keyRE.FindString(created.Stdout)
	if secret == "" {
		t.Fatalf("keys create printed no key:\n%s", created.Stdout)
	}
	s.Must(http.StatusOK, "GET", "/api/v1/domains", secret, nil)
	if r := s.Do("POST", "/api/v1/domains", secret, map[string]string{"name": "x.test"}); r.Status != http.StatusForbidden || r.ErrorCode(t) != "insufficient_scope" {
		t.Fatalf("read key writing: %d %s", r.Status, r.Body)
	}

	list := MustCLI(t, dd, "keys", "list", "--org", "default")
	if !strings.Contains(list.Stdout, secret[:8]) || strings.Contains(list.Stdout, secret) {
		t.Fatalf("keys list must show the prefix and never the key:\n%s", list.Stdout)
	}
	id := idOfKey(t, dd, "ci")
	MustCLI(t, dd, "keys", "revoke", id)
	if r := s.Do("GET", "/api/v1/domains", secret, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("revoked key still works: %d", r.Status)
	}

	// Offline: the file is used directly once the server is gone.
	s.Stop()
	if _, err := os.Stat(filepath.Join(s.DataDir, "dmarcd.sock")); !os.IsNotExist(err) {
		t.Errorf("admin socket left behind after shutdown: %v", err)
	}
	off := MustCLI(t, dd, "keys", "create", "--org", "default", "--name", "offline")
	offline := keyRE.FindString(off.Stdout)
	MustCLI(t, dd, "org", "create", "acme", "--plan", "starter")
	orgs := MustCLI(t, dd, "org", "list")
	if !strings.Contains(orgs.Stdout, "acme") || !strings.Contains(orgs.Stdout, "starter") {
		t.Errorf("org list:\n%s", orgs.Stdout)
	}
	s2 := StartServer(t, Options{DataDir: s.DataDir})
	if s2.Key != "" {
		t.Errorf("a second start printed a new bootstrap key")
	}
	s2.Must(http.StatusOK, "GET", "/api/v1/domains", offline, nil)
	if r := s2.Do("GET", "/api/v1/domains", secret, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("revoked key works after restart: %d", r.Status)
	}
}

// TestDomainCLIThroughServer adds, verifies and deletes a domain with the
// built binary's 'dmarcd domain' against a running server (issue 24 item
// 15): no curl needed, and the API sees the same domain.
func TestDomainCLIThroughServer(t *testing.T) {
	ns := dnstest.Start(t)
	s := StartServer(t, Options{DNS: ns})
	dd := "--data-dir=" + s.DataDir
	out := MustCLI(t, dd, "--json", "domain", "add", "cli.example")
	var added struct {
		ID, Name, ReportingEmail string
		DMARCRecord              string                         `json:"dmarc_record"`
		DNSRecords               []struct{ Name, Value string } `json:"dns_records"`
	}
	if err := json.Unmarshal([]byte(out.Stdout), &added); err != nil || added.Name != "cli.example" || len(added.DNSRecords) < 2 {
		t.Fatalf("domain add --json: %v\n%s", err, out.Stdout)
	}
	got := s.Must(http.StatusOK, "GET", "/api/v1/domains/"+added.ID, s.Key, nil)
	if got["name"] != "cli.example" || got["status"] != "pending" || got["reporting_email"] == "" {
		t.Errorf("the API's view of the domain: %v", got)
	}
	if r := RunCLI(t, nil, dd, "domain", "verify", "cli.example"); r.Code != 1 || !strings.Contains(r.Stderr, "not verified") {
		t.Errorf("verify before publishing: exit %d %s", r.Code, r.Stderr)
	}
	ns.SetTXT("_dmarc.cli.example", []string{added.DMARCRecord})
	if r := MustCLI(t, dd, "domain", "verify", "cli.example"); !strings.Contains(r.Stdout, "is verified") {
		t.Errorf("verify: %s", r.Stdout)
	}
	MustCLI(t, dd, "domain", "delete", "cli.example", "--yes")
	if r := s.Do("GET", "/api/v1/domains/"+added.ID, s.Key, nil); r.Status != http.StatusNotFound {
		t.Errorf("the API after domain delete: %d", r.Status)
	}
}

// idOfKey finds the id of the key named name with keys list --json.
func idOfKey(t *testing.T, dataDirFlag, name string) string {
	t.Helper()
	out := MustCLI(t, dataDirFlag, "keys", "list", "--org", "default", "--json")
	var keys []struct{ ID, Name string }
	if err := json.Unmarshal([]byte(out.Stdout), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Name == name {
			return k.ID
		}
	}
	t.Fatalf("no key named %q in:\n%s", name, out.Stdout)
	return ""
}

// TestBackupWhileServingAndRestore ensures a hot backup of a running server
// restores into a fresh data dir with the same domains and keys.
func TestBackupWhileServingAndRestore(t *testing.T) {
	s := StartServer(t, Options{})
	for _, d := range []string{"one.test", "two.test", "three.test"} {
		s.Must(http.StatusCreated, "POST", "/api/v1/domains", s.Key, map[string]string{"name": d})
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	MustCLI(t, "--data-dir", s.DataDir, "backup", backup)
	before := s.Must(http.StatusOK, "GET", "/api/v1/domains", s.Key, nil)

	fresh := t.TempDir()
	refused := RunCLI(t, nil, "--data-dir", s.DataDir, "restore", backup)
	if refused.Code == 0 || !strings.Contains(refused.Stderr, "running") {
		t.Fatalf("restore over a running server: exit %d, %s", refused.Code, refused.Stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.db")
	os.WriteFile(bad, []byte("not a database"), 0o600)
	if r := RunCLI(t, nil, "--data-dir", fresh, "restore", bad); r.Code == 0 {
		t.Fatalf("restore of a non-database succeeded")
	}
	MustCLI(t, "--data-dir", fresh, "restore", backup)

	s2 := StartServer(t, Options{DataDir: fresh})
	after := s2.Must(http.StatusOK, "GET", "/api/v1/domains", s.Key, nil)
	if got, want := jsonString(t, after["data"]), jsonString(t, before["data"]); got != want {
		t.Fatalf("restored domains differ:\n got %s\nwant %s", got, want)
	}
}

// TestSecondServerAndFlagErrors ensures misuse gets a clear message: a
// second server on the same data dir, bad flags (exit 2), env config.
func TestSecondServerAndFlagErrors(t *testing.T) {
	s := StartServer(t, Options{})
	second := RunCLI(t, nil, "serve", "--data-dir", s.DataDir, "--listen", "127.0.0.1:0")
	if second.Code != 1 || !strings.Contains(second.Stderr, "another") {
		t.Errorf("second serve: exit %d, stderr %q", second.Code, second.Stderr)
	}
	if r := RunCLI(t, nil, "serve", "--no-such-flag"); r.Code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", r.Code)
	}
	if r := RunCLI(t, nil, "keys", "create", "--data-dir", s.DataDir, "--name", "x"); r.Code != 2 || !strings.Contains(r.Stderr, "org") {
		t.Errorf("missing --org: exit %d, %q", r.Code, r.Stderr)
	}
	if r := RunCLI(t, []string{"DMARCD_DATA_DIR=" + filepath.Join(t.TempDir(), "nowhere")}, "keys", "list", "--org", "default"); r.Code != 1 || !strings.Contains(r.Stderr, "no database") {
		t.Errorf("keys list on a missing data dir: exit %d, %q", r.Code, r.Stderr)
	}
	// DMARCD_DATA_DIR reaches the command like --data-dir.
	if r := RunCLI(t, []string{"DMARCD_DATA_DIR=" + s.DataDir}, "org", "list", "--json"); r.Code != 0 || !strings.Contains(r.Stdout, `"default"`) {
		t.Errorf("org list via DMARCD_DATA_DIR: exit %d, %s %s", r.Code, r.Stdout, r.Stderr)
	}
}

// jsonString re-encodes v canonically, for comparing decoded bodies.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
