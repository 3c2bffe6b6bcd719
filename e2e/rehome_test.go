package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/dnstest"
)

// TestUnverifiedAddressFollowsReportingDomain ensures a domain registered
// before --reporting-domain was set right gets an address at the new
// reporting domain on the next start, with the same local part.
func TestUnverifiedAddressFollowsReportingDomain(t *testing.T) {
	// A DNS server that answers (NXDOMAIN): registration needs DNS.
	s := StartServer(t, Options{DNS: dnstest.Start(t)})
	created := s.Must(http.StatusCreated, "POST", "/api/v1/domains", s.Key, map[string]string{"name": "example.com"})
	id, _ := created["id"].(string)
	old, _ := created["reporting_email"].(string)
	local, host, _ := strings.Cut(old, "@")
	if host != "reports.dmarcd.test" {
		t.Fatalf("first address %s", old)
	}
	s.Stop()
	s2 := StartServer(t, Options{DataDir: s.DataDir, DNS: dnstest.Start(t), Args: []string{"--reporting-domain", "mx.example.net"}})
	got := s2.Must(http.StatusOK, "GET", "/api/v1/domains/"+id, s.Key, nil)
	if email, _ := got["reporting_email"].(string); email != local+"@mx.example.net" {
		t.Errorf("after restart: %s, want %s@mx.example.net", email, local)
	}
	if rec, _ := got["dmarc_record"].(string); !strings.Contains(rec, local+"@mx.example.net") || strings.Contains(rec, old) {
		t.Errorf("suggested record not moved: %s", rec)
	}
	if !strings.Contains(s2.Stderr(), "follows --reporting-domain") {
		t.Errorf("the move is not logged")
	}
}

// TestOrgDeleteThroughSocket ensures org rename and delete work against a
// running server: the deleted organization's key stops at once and
// another organization's key keeps working.
func TestOrgDeleteThroughSocket(t *testing.T) {
	s := StartServer(t, Options{DNS: dnstest.Start(t)})
	dd := "--data-dir=" + s.DataDir
	MustCLI(t, dd, "org", "create", "acme")
	MustCLI(t, dd, "org", "rename", "acme", "Acme Corp")
	secret := keyRE.FindString(MustCLI(t, dd, "keys", "create", "--org", "Acme Corp", "--name", "ci").Stdout)
	s.Must(http.StatusCreated, "POST", "/api/v1/domains", secret, map[string]string{"name": "example.com"})
	out := MustCLI(t, dd, "org", "delete", "acme corp", "--yes")
	if !strings.Contains(out.Stdout, "1 domains") || !strings.Contains(out.Stdout, "1 API keys") {
		t.Errorf("delete said:\n%s", out.Stdout)
	}
	if r := s.Do("GET", "/api/v1/domains", secret, nil); r.Status != http.StatusUnauthorized {
		t.Errorf("the deleted organization's key: %d", r.Status)
	}
	s.Must(http.StatusOK, "GET", "/api/v1/domains", s.Key, nil)
	// The log is its own pipe: wait for the line rather than race it.
	s.WaitLog("organization deleted")
}
