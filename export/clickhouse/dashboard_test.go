package clickhouse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDashboardQueries ensures every query of the Grafana dashboard and
// every SQL block of docs/clickhouse.md runs on the real server against
// the tables the sink creates and fills, and answers rows; and that the
// fleet-wide figures agree with the store.
func TestDashboardQueries(t *testing.T) {
	srv, database := sharedServer(t)
	e := newEnv(t)
	e.ingestAggregate(t, addrA, 1, 3, 40)
	e.ingestAggregate(t, addrB, 100, 2, 30)
	e.ingestFile(t, addrA, "../../dmarc/tlsrpt/testdata/google.json")
	s := newSink(t, e.DB, srv, database, nil)
	if _, err := s.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The generated reports' days are in 2024 and 2025: a range from 2000.
	timeRange := strings.NewReplacer("$__fromTime", "toDateTime('2000-01-01 00:00:00')", "$__toTime", "now()")

	raw, err := os.ReadFile("../../packaging/grafana/dmarcd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ RawSQL string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	answers := map[string]string{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := timeRange.Replace(strings.ReplaceAll(tg.RawSQL, "${db}", database))
			got, err := srv.TryQuery(q)
			if err != nil || got == "" {
				t.Errorf("panel %q: %q, %v\n%s", p.Title, got, err, q)
			}
			answers[p.Title] = got
		}
	}
	if len(answers) < 8 {
		t.Errorf("%d panels with queries", len(answers))
	}
	if answers["Organizations"] != "2" {
		t.Errorf("Organizations = %q, want 2", answers["Organizations"])
	}
	want := e.storeCounts(t)
	var msgs int64
	for _, c := range want {
		var reps, recs, m int64
		_, _ = fmtSscan(c, &reps, &recs, &m)
		msgs += m
	}
	if answers["Messages"] != itoa(msgs) {
		t.Errorf("Messages = %q, the store has %d", answers["Messages"], msgs)
	}

	doc, err := os.ReadFile("../../docs/clickhouse.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) != len(answers) {
		t.Errorf("docs/clickhouse.md has %d SQL blocks, the dashboard %d queries", len(blocks), len(answers))
	}
	for _, b := range blocks {
		q := timeRange.Replace(strings.ReplaceAll(b[1], "dmarc.", database+"."))
		if got, err := srv.TryQuery(q); err != nil || got == "" {
			t.Errorf("docs query: %q, %v\n%s", got, err, q)
		}
	}
}

func fmtSscan(s string, v ...any) (int, error) { return fmt.Sscan(s, v...) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
