package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
)

// TestTLSReportsEveryWayIn ensures, with the built binary, that a domain's
// TLS-RPT record names the HTTPS URI when --public-url is https; that TLS
// reports are stored when POSTed there (gzip: 201, again: 200), mailed
// over SMTP, and imported as a bare .json file (counted as TLS reports in
// the import summary); that a 20 MB POST is 413, an invalid one 400 with
// its reason, an unknown local part 404; and that the API lists exactly
// the three reports stored.
func TestTLSReportsEveryWayIn(t *testing.T) {
	s := StartServer(t, Options{Args: []string{"--public-url", "https://dmarc.example.test/"}})
	d := s.Must(http.StatusCreated, "POST", "/api/v1/domains", s.Key, map[string]string{"name": "example.com"})
	domID, email := d["id"].(string), d["reporting_email"].(string)
	local, _, _ := strings.Cut(email, "@")
	recs, _ := d["dns_records"].([]any)
	want := "v=TLSRPTv1; rua=mailto:" + email + ",https://dmarc.example.test/tlsrpt/" + local
	if last := recs[len(recs)-1].(map[string]any); last["value"] != want {
		t.Errorf("TLS-RPT record %v, want %q", last, want)
	}

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "dmarc", "tlsrpt", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(read("google.json"))
	zw.Close()
	post := func(path, ctype string, body io.Reader) (int, string) {
		t.Helper()
		resp, err := http.Post(s.URL+path, ctype, body)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/tlsrpt/"+local, "application/tlsrpt+gzip", bytes.NewReader(gz.Bytes())); code != 201 {
		t.Fatalf("POST gzip: %d %s", code, body)
	}
	if code, body := post("/tlsrpt/"+local, "application/tlsrpt+gzip", bytes.NewReader(gz.Bytes())); code != 200 {
		t.Fatalf("POST again: %d %s", code, body)
	}
	if code, body := post("/tlsrpt/"+local, "application/tlsrpt+json", strings.NewReader(`{"report-id":"x","policies":[`)); code != 400 || !strings.Contains(body, "bad_request") {
		t.Errorf("invalid report: %d %s", code, body)
	}
	big := io.LimitReader(neverEnding('x'), 20<<20)
	if code, body := post("/tlsrpt/"+local, "application/tlsrpt+json", big); code != 413 {
		t.Errorf("20 MB: %d %s", code, body)
	}
	if code, _ := post("/tlsrpt/nobody", "application/tlsrpt+json", bytes.NewReader(read("google.json"))); code != 404 {
		t.Errorf("unknown local part: %d", code)
	}

	msg := ingesttest.MailWith("tlsrpt-noreply@microsoft.com", email, read("microsoft.json"), "application/tlsrpt+json", "microsoft.json")
	if err := sendMail(s.SMTPAddr(), "tlsrpt-noreply@microsoft.com", []string{email}, msg); err != nil {
		t.Fatalf("SMTP: %v", err)
	}

	dir := t.TempDir()
	nulls := bytes.ReplaceAll(read("nopolicy_nulls.json"), []byte(`"example.org"`), []byte(`"example.com"`))
	if err := os.WriteFile(filepath.Join(dir, "report.json"), nulls, 0o600); err != nil {
		t.Fatal(err)
	}
	var sum imports.Summary
	out := MustCLI(t, "--data-dir", s.DataDir, "import", "--json", dir)
	if err := json.Unmarshal([]byte(out.Stdout), &sum); err != nil {
		t.Fatalf("import --json: %v\n%s", err, out.Stdout)
	}
	if sum.TLSReports != 1 || sum.Quarantined != 0 || sum.Failed != 0 {
		t.Errorf("import summary %+v", sum)
	}

	list := s.Must(http.StatusOK, "GET", "/api/v1/tls-reports?domain_id="+domID, s.Key, nil)
	data, _ := list["data"].([]any)
	orgs := map[string]bool{}
	for _, r := range data {
		orgs[r.(map[string]any)["organization_name"].(string)] = true
	}
	if len(data) != 3 || !orgs["Google Inc."] || !orgs["Microsoft Corporation"] {
		t.Errorf("listed %d TLS reports from %v, want 3", len(data), orgs)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
