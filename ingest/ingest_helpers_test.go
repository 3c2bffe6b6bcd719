package ingest

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// env is a running pipeline over a real store in the test's directory.
type env struct {
	db  *store.DB
	p   *Pipeline
	org *store.Organization
}

// newEnv opens a store, creates an organization, and runs a pipeline whose
// config tweak may change; the pipeline stops when the test ends.
func newEnv(t *testing.T, tweak func(*Config)) *env {
	t.Helper()
	db := storetest.Open(t)
	e := &env{db: db, org: storetest.MustOrganization(t, db, "acme", store.PlanUnlimited)}
	e.p = startPipeline(t, db, tweak)
	return e
}

// startPipeline creates and runs a pipeline over db until the test ends.
func startPipeline(t testing.TB, db *store.DB, tweak func(*Config)) *Pipeline {
	t.Helper()
	cfg := Config{Store: db, Now: storetest.Epoch}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

func (e *env) domain(t *testing.T, name string) *store.Domain {
	t.Helper()
	return storetest.MustDomain(t, e.db, e.org.ID, name)
}

// ingest runs one input through the pipeline and fails the test on error.
func (e *env) ingest(t *testing.T, data []byte, d Arrival) *Result {
	t.Helper()
	res, err := e.p.Ingest(context.Background(), bytes.NewReader(data), d)
	if err != nil {
		t.Fatalf("Ingest(%s): %v", d.Name, err)
	}
	return res
}

func importOf(name string) Arrival { return Arrival{Source: SourceImport, Name: name} }

func smtpTo(rcpt string) Arrival {
	return Arrival{Source: SourceSMTP, Recipient: rcpt, Name: "reporter@example.net -> " + rcpt}
}

// openGeo opens the MaxMind test databases.
func openGeo(t testing.TB) *geo.DB {
	t.Helper()
	g, err := geo.Open(geo.Config{
		CityPath: filepath.Join("..", "testdata", "geo", "GeoIP2-City-Test.mmdb"),
		ASNPath:  filepath.Join("..", "testdata", "geo", "GeoLite2-ASN-Test.mmdb"),
	})
	if err != nil {
		t.Fatalf("geo: %v", err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

func mustReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// allRecords returns every record of a report.
func allRecords(t *testing.T, db *store.DB, orgID, id string) []*store.Record {
	t.Helper()
	var recs []*store.Record
	if err := db.ReportRecords(orgID, id, func(r *store.Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatalf("ReportRecords: %v", err)
	}
	return recs
}

// countKeys counts the keys of a bucket of the file, to see what is left
// after a cascade or a crash (the names are the store's schema).
func countKeys(t testing.TB, db *store.DB, bucket string) int {
	t.Helper()
	return len(storetest.Keys(t, db, bucket))
}

// reportBuckets are the store's buckets that hold report data.
var reportBuckets = []string{"reports", "reports_by_domain", "report_records", "reports_pending", "report_rollups"}

func sumCounts(recs []*store.Record) (msgs, pass int64) {
	for _, r := range recs {
		msgs += r.Count
		if r.DMARC == "pass" {
			pass += r.Count
		}
	}
	return msgs, pass
}

// storedRecords counts the records of every visible report of the file and
// the record blocks that belong to no visible report (leftovers).
func storedRecords(t testing.TB, db *store.DB) (records, orphans int) {
	t.Helper()
	orgs, err := db.ListOrganizations()
	if err != nil {
		t.Fatal(err)
	}
	visible := map[[16]byte]bool{}
	for _, org := range orgs {
		reps, _, err := db.ListReports(org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 1 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reps {
			visible[uuidBytes(t, r.ID)] = true
			if err := db.ReportRecords(org.ID, r.ID, func(*store.Record) error { records++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range storetest.Keys(t, db, "report_records") {
		if len(k) < 16 || !visible[[16]byte(k[:16])] {
			orphans++
		}
	}
	return records, orphans
}

func uuidBytes(t testing.TB, id string) [16]byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(b) != 16 {
		t.Fatalf("bad id %q", id)
	}
	return [16]byte(b)
}
