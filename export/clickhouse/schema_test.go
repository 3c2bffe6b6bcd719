package clickhouse

import (
	"strings"
	"testing"
)

// TestCreateTables ensures the DDL uses LowCardinality and codecs only for
// servers that have them, and that a cluster gets local tables and
// Distributed tables sharded by organization and domain. (The 18.16 DDL
// runs on a real server in the other tests.)
func TestCreateTables(t *testing.T) {
	for _, c := range []struct {
		version string
		modern  bool
	}{{"18.16.1", false}, {"19.17.4.11", false}, {"20.3.1", true}, {"24.8.4.13\n", true}} {
		f, err := featuresOf(c.version)
		if err != nil {
			t.Fatal(err)
		}
		ddl := strings.Join(createTables(f, "dmarc", ""), "\n")
		if strings.Contains(ddl, "LowCardinality(") != c.modern || strings.Contains(ddl, "CODEC(") != c.modern {
			t.Errorf("%s: LowCardinality and codecs %v expected, DDL:\n%s", c.version, c.modern, ddl)
		}
		if n := strings.Count(ddl, "ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMM(day)"); n != len(tables) {
			t.Errorf("%s: %d ReplacingMergeTree tables, want %d", c.version, n, len(tables))
		}
	}
	if _, err := featuresOf("nonsense"); err == nil {
		t.Error("a version without a number was accepted")
	}
	f, _ := featuresOf("18.16.1")
	ddl := createTables(f, "dmarc", "fleet")
	if len(ddl) != 2*len(tables) || !strings.Contains(ddl[0], "`dmarc`.`aggregate_reports_local`") ||
		!strings.Contains(ddl[1], "Distributed(fleet, dmarc, aggregate_reports_local, cityHash64(org_id, domain))") {
		t.Errorf("cluster DDL:\n%s", strings.Join(ddl, "\n"))
	}
	for _, tb := range tables {
		if !strings.HasPrefix(tb.orderBy, "org_id, domain, day") || !strings.Contains(tb.orderBy, "report_id") {
			t.Errorf("%s sorted by %s: want (org_id, domain, day, ...) ending with the row's identity", tb.name, tb.orderBy)
		}
	}
}

// FuzzParseEndpoint ensures any URL either parses or is refused, without
// a panic, and that neither the endpoint's text nor the error ever shows
// the password.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"http://dmarcd@ch:8123/?database=dmarc", "https://ch/", "http://u:p@h/", "ftp://x", "http://h/?database=a;b", "%zz"} {
		f.Add(s)
	}
	const pw = "Zq9-secret-pw"
	f.Fuzz(func(t *testing.T, raw string) {
		ep, err := ParseEndpoint(raw, pw, "")
		if err != nil {
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the password is in the error %q", err)
			}
			return
		}
		if strings.Contains(ep.String(), pw) {
			t.Fatalf("the password is in %q", ep.String())
		}
		if !identRE.MatchString(ep.Database) {
			t.Fatalf("database %q accepted", ep.Database)
		}
	})
}
