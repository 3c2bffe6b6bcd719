package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/dmarcd/dmarcd/store"
)

// TestCreateDomainNeedsTheDNS ensures a registration never suggests a
// record made blind: with the DNS failing (SERVFAIL) or silent (a server
// that never answers) POST /domains is 503 dns_unavailable and creates
// nothing, while NXDOMAIN still gets the p=none suggestion, and a p=reject
// record is kept and remembered for change detection.
func TestCreateDomainNeedsTheDNS(t *testing.T) {
	e := newEnv(t, 1000)
	e.dns.SetRcode("_dmarc.servfail.example", dns.RcodeServerFailure)
	e.dns.SetDrop("_dmarc.silent.example", true)
	for _, name := range []string{"servfail.example", "silent.example"} {
		r := e.do("POST", "/api/v1/domains", e.keyA, map[string]string{"name": name})
		if r.status != http.StatusServiceUnavailable || r.errorCode(t) != "dns_unavailable" {
			t.Errorf("%s: %d %s, want 503 dns_unavailable", name, r.status, r.body)
		}
	}
	if ds, total, err := e.db.ListDomains(e.orgA.ID, store.Page{Page: 1, Limit: 10}); err != nil || total != 0 {
		t.Fatalf("domains after DNS failures: %v %d %v", ds, total, err)
	}

	d := e.createDomain(e.keyA, "nxdomain.example")
	if rec, _ := d["dmarc_record"].(string); !strings.HasPrefix(rec, "v=DMARC1; p=none;") {
		t.Errorf("suggestion for a domain without a record: %q, want p=none", rec)
	}

	const strict = "v=DMARC1; p=reject; rua=mailto:own@strict.example"
	e.dns.SetTXT("_dmarc.strict.example", []string{strict})
	d = e.createDomain(e.keyA, "strict.example")
	stored, err := e.db.FindDomainByID(d["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if stored.RegisteredDNSRecord != strict {
		t.Errorf("RegisteredDNSRecord = %q, want %q", stored.RegisteredDNSRecord, strict)
	}
	if rec := d["dmarc_record"].(string); !strings.HasPrefix(rec, "v=DMARC1; p=reject;") {
		t.Errorf("suggestion %q weakens p=reject", rec)
	}
}
