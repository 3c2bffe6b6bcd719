package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
)

// TestReadsSameAfterSealing ensures sealing records into blocks changes no
// byte any reader answers: the same input (the corpus of real reports,
// generated ones of several days and sizes, one larger than a block) is
// read through every GET route that shows reports, records or what is
// derived from them, before sealing, after sealing the closed days (a mix
// of sealed and unsealed records), and after sealing everything; the three
// answers of each route are compared byte for byte.
func TestReadsSameAfterSealing(t *testing.T) {
	e := newEnv(t, 100000)
	p := e.withPipeline(t)
	var domIDs []string
	for _, name := range []string{"example.com", "example.de", "example.net", "example.org", "gen.example"} {
		domIDs = append(domIDs, e.createDomain(e.keyA, name)["id"].(string))
	}
	files, _ := filepath.Glob("../testdata/corpus/aggregate/*")
	if len(files) < 10 {
		t.Fatalf("corpus: %d files", len(files))
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mustIngest(t, p, raw, ingest.Arrival{Source: ingest.SourceImport, OrgID: e.orgA.ID, Name: filepath.Base(f)})
	}
	now := e.clock.Now()
	for i, n := range []int{1, 5, 50, 50, 300, 20000, 7, 2} {
		// Days back: closed days, and today's, which stays open.
		begin := now.Truncate(24*time.Hour).AddDate(0, 0, -[]int{3, 3, 3, 4, 10, 5, 0, 0}[i])
		raw := reportgen.Generate(int64(100+i), n, reportgen.Options{Domain: "gen.example", Begin: begin, OrgName: []string{"google.com", "yahoo.com"}[i%2]})
		res := mustIngest(t, p, raw, ingest.Arrival{Source: ingest.SourceImport, OrgID: e.orgA.ID, Name: "gen.xml"})
		if len(res.Reports) != 1 {
			t.Fatalf("generated report %d: %+v", i, res)
		}
	}
	e.clock.Advance(time.Hour)

	read := func() map[string][]byte {
		t.Helper()
		out := map[string][]byte{}
		get := func(path string) []byte {
			r := e.do("GET", path, e.keyA, nil)
			out[path] = append([]byte(r.header.Get("Content-Type")+"\n"), r.body...)
			return r.body
		}
		var ids []string
		var list reportList
		if err := json.Unmarshal(get("/api/v1/reports?limit=100"), &list); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Data {
			ids = append(ids, r.ID)
		}
		if len(ids) < 20 {
			t.Fatalf("%d reports stored", len(ids))
		}
		sort.Strings(ids)
		for _, id := range ids {
			for _, s := range []string{"", "/statistics", "/export/csv"} {
				get("/api/v1/reports/" + id + s)
			}
		}
		for _, q := range []string{"format=csv", "format=ndjson", "format=csv&date_from=2026-11-01"} {
			get("/api/v1/reports/export?" + q)
		}
		for _, id := range domIDs {
			for _, s := range []string{"/statistics", "/sources", "/senders", "/policy-advice",
				"/statistics?date_from=2026-11-01&date_to=2026-11-23", "/sources?date_from=2026-10-01&date_to=2026-11-23"} {
				get("/api/v1/domains/" + id + s)
			}
		}
		get("/api/v1/forensic-reports")
		get("/api/v1/tls-reports")
		return out
	}
	before := read()
	st, err := e.db.SealRecords(context.Background(), store.SealOptions{})
	if err != nil || st.Blocks == 0 || st.Open == 0 {
		t.Fatalf("sealing the closed days: %+v, %v; want some sealed and some open", st, err)
	}
	mixed := read()
	st, err = e.db.SealRecords(context.Background(), store.SealOptions{All: true})
	if err != nil || st.Blocks == 0 || st.Open != 0 {
		t.Fatalf("sealing everything: %+v, %v", st, err)
	}
	after := read()
	if err := e.db.Check(); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]map[string][]byte{"closed days sealed": mixed, "all sealed": after} {
		if len(got) != len(before) {
			t.Fatalf("%s: %d answers, %d before", name, len(got), len(before))
		}
		for path, want := range before {
			if !bytes.Equal(got[path], want) {
				t.Errorf("%s: GET %s differs:\n%.300s\nwant\n%.300s", name, path, got[path], want)
			}
		}
	}
	// The large report spans blocks and its records all came back: its
	// CSV has one line per record and a header.
	var big int
	for path, body := range after {
		if strings.HasSuffix(path, "/export/csv") && bytes.Count(body, []byte("\n")) > 20000 {
			big++
		}
	}
	if big != 1 {
		t.Fatalf("%d CSVs of the 20,000-record report", big)
	}
}

// TestReportRecordsDropped ensures a report whose records the record
// retention dropped still answers its detail, with its counts, an empty
// records list and records_dropped, and its statistics as before; a
// later report is untouched and says nothing of it.
func TestReportRecordsDropped(t *testing.T) {
	e := newReportEnv(t)
	stats := e.do("GET", "/api/v1/reports/"+e.r1.ID+"/statistics", e.keyA, nil).body
	later := e.do("GET", "/api/v1/reports/"+e.r2.ID, e.keyA, nil).body
	if n, err := e.db.DropRecordsBefore(time.Date(2026, 11, 4, 0, 0, 0, 0, time.UTC), nil); err != nil || n != 3 {
		t.Fatalf("dropped %d, %v; want r1, r3 and rb", n, err)
	}
	r := e.do("GET", "/api/v1/reports/"+e.r1.ID, e.keyA, nil)
	var got struct {
		RecordCount    int               `json:"record_count"`
		RecordsDropped *bool             `json:"records_dropped"`
		Records        []json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got.RecordsDropped == nil || !*got.RecordsDropped || got.Records == nil || len(got.Records) != 0 || got.RecordCount != len(e.r1.records) {
		t.Fatalf("detail after the drop: %s", r.body)
	}
	if b := e.do("GET", "/api/v1/reports/"+e.r1.ID+"/statistics", e.keyA, nil).body; !bytes.Equal(b, stats) {
		t.Fatalf("statistics changed:\n%s\nwant\n%s", b, stats)
	}
	if b := e.do("GET", "/api/v1/reports/"+e.r2.ID, e.keyA, nil).body; !bytes.Equal(b, later) {
		t.Fatalf("a later report changed:\n%s\nwant\n%s", b, later)
	}
}
