package store_test

import (
	"compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store"
)

// copyOldFile writes a copy of a gzipped database file of testdata into a
// new temporary directory and returns its path.
func copyOldFile(t testing.TB, gz string) string {
	t.Helper()
	f, err := os.Open(gz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dmarcd.db")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawSchemaVersion reads the schema version of a file without opening it
// as a store (which would migrate it).
func rawSchemaVersion(t *testing.T, path string) uint64 {
	t.Helper()
	raw, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var v uint64
	_ = raw.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket([]byte("meta")).Get([]byte("schema_version")))
		return nil
	})
	return v
}

// evidenceOfRecords computes each source's evidence from the stored
// records the plain way, to compare the roll-ups with: per source, kind
// and lower-cased domain, the messages that carried the domain (once per
// record) and those on which it passed.
func evidenceOfRecords(t *testing.T, db *store.DB, orgID, domainID string) map[string]map[string][2]int64 {
	t.Helper()
	reps, _, err := db.ListReports(orgID, store.ReportFilter{DomainID: domainID, Page: store.Page{Page: 1, Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][2]int64{}
	for _, rep := range reps {
		err := db.ReportRecords(orgID, rep.ID, func(r *store.Record) error {
			seen := map[string][2]int64{}
			note := func(kind, domain, result string) {
				k := kind + " " + strings.ToLower(domain)
				c := seen[k]
				c[0] = r.Count
				if result == "pass" {
					c[1] = r.Count
				}
				seen[k] = c
			}
			for _, a := range r.AuthResults.DKIM {
				note(store.EvidenceDKIM, a.Domain, a.Result)
			}
			for _, a := range r.AuthResults.SPF {
				note(store.EvidenceSPF, a.Domain, a.Result)
			}
			if out[r.SourceIP] == nil {
				out[r.SourceIP] = map[string][2]int64{}
			}
			for k, c := range seen {
				sum := out[r.SourceIP][k]
				out[r.SourceIP][k] = [2]int64{sum[0] + c[0], sum[1] + c[1]}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEvidenceMigration ensures a file written by the code of schema 6
// (testdata/schema6-sources.db.gz, made by testdata/schema6_sources.go in
// a checkout of that code) moves to the current schema on Open, its per-source
// roll-ups rebuilt from the stored records with the evidence of who sends:
// each source's DKIM and SPF domains with their messages and passes,
// exactly as the records say, including the signature that schema 6's
// eight entries per source had dropped. Opening again changes nothing.
func TestEvidenceMigration(t *testing.T) {
	path := copyOldFile(t, "testdata/schema6-sources.db.gz")
	if v := rawSchemaVersion(t, path); v != 6 {
		t.Fatalf("the old file has schema %d, want 6", v)
	}
	for round := range 2 {
		db, err := store.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := store.SchemaVersionOf(db); err != nil || v != store.SchemaVersion {
			t.Fatalf("round %d: schema %d %v, want %d", round, v, err, store.SchemaVersion)
		}
		org, err := db.FindOrganization("acme")
		if err != nil {
			t.Fatal(err)
		}
		doms, err := db.AllDomains()
		if err != nil || len(doms) != 1 {
			t.Fatalf("%d domains, %v", len(doms), err)
		}
		want := evidenceOfRecords(t, db, org.ID, doms[0].ID)
		got := map[string]map[string][2]int64{}
		var messages int64
		err = db.EachSourceDay(org.ID, doms[0].ID, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC),
			func(_ time.Time, s *store.SourceRollup) {
				messages += s.Messages
				if got[s.SourceIP] == nil {
					got[s.SourceIP] = map[string][2]int64{}
				}
				for _, e := range s.Evidence {
					c := got[s.SourceIP][e.Kind+" "+e.Domain]
					got[s.SourceIP][e.Kind+" "+e.Domain] = [2]int64{c[0] + e.Messages, c[1] + e.Pass}
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != 6 || messages != 2*(40+12+25+9+30+7*2+3+5) {
			t.Fatalf("the old file holds %d sources and %d messages", len(want), messages)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round %d: evidence of the roll-ups\n%v\nwant, from the records,\n%v", round, got, want)
		}
		if c := got["192.0.2.9"]["dkim sendgrid.net"]; c != [2]int64{10, 10} {
			t.Errorf("the signature schema 6 dropped: %v, want 10 messages, 10 passing", c)
		}
		if c := got["198.51.100.1"]["dkim sendgrid.net"]; c != [2]int64{80, 80} {
			t.Errorf("SendGrid.net in lower case: %v", got["198.51.100.1"])
		}
		if err := db.Check(); err != nil {
			t.Error(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
