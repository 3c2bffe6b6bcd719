package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// TestDatesInQueries ensures date_from/date_to take Unix seconds, RFC 3339
// (any offset, "+" left unencoded too) and dates, all meaning the same.
func TestDatesInQueries(t *testing.T) {
	e := newReportEnv(t)
	want := e.do("GET", "/api/v1/reports?date_from="+strconv.FormatInt(time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC).Unix(), 10), e.keyA, nil)
	var base reportList
	if err := json.Unmarshal(want.body, &base); err != nil || base.Pagination.Total != 2 {
		t.Fatalf("Unix seconds: %d %s", want.status, want.body)
	}
	for _, q := range []string{"2026-11-03", "2026-11-03T00:00:00Z", "2026-11-03T01:00:00%2B01:00", "2026-11-03T01:00:00+01:00", "2026-11-03T00:00:00.000Z"} {
		r := e.do("GET", "/api/v1/reports?date_from="+q, e.keyA, nil)
		var got reportList
		if r.status != 200 || json.Unmarshal(r.body, &got) != nil || got.Pagination.Total != base.Pagination.Total {
			t.Errorf("date_from=%s: %d %s, want the %d reports of Unix seconds", q, r.status, r.body, base.Pagination.Total)
		}
	}
	stats := e.do("GET", "/api/v1/domains/"+e.a1.ID+"/statistics?date_from=2026-11-01&date_to=2026-11-05T00:00:00Z", e.keyA, nil)
	if stats.status != 200 || !strings.Contains(string(stats.body), `"date_from":"2026-11-01T00:00:00Z"`) {
		t.Errorf("statistics with dates: %d %.300s", stats.status, stats.body)
	}
}

// TestIDsCaseInsensitive ensures ids in paths and queries match in any
// case, and another organization's id stays 404 in any case.
func TestIDsCaseInsensitive(t *testing.T) {
	e := newReportEnv(t)
	up := strings.ToUpper
	for path, status := range map[string]int{
		"/api/v1/domains/" + up(e.a1.ID):                    200,
		"/api/v1/domains/" + up(e.a1.ID) + "/statistics":    200,
		"/api/v1/reports/" + up(e.r1.ID):                    200,
		"/api/v1/reports?domain_id=" + up(e.a1.ID):          200,
		"/api/v1/domains/" + up(e.b1.ID):                    404,
		"/api/v1/reports/" + up(e.rb.ID):                    404,
		"/api/v1/reports?domain_id=" + up(e.b1.ID):          404,
		"/api/v1/forensic-reports?domain_id=" + up(e.a1.ID): 200,
	} {
		if r := e.do("GET", path, e.keyA, nil); r.status != status {
			t.Errorf("GET %s: %d %.200s, want %d", path, r.status, r.body, status)
		}
	}
}

// TestHeadersTooLargeIsJSON ensures oversized request headers get a JSON
// 431 like every other error.
func TestHeadersTooLargeIsJSON(t *testing.T) {
	e := newEnv(t, 100)
	r := e.do("GET", "/api/v1/domains", e.keyA, nil, "X-Junk", strings.Repeat("a", MaxHeaderBytes))
	if r.status != http.StatusRequestHeaderFieldsTooLarge || r.errorCode(t) != "headers_too_large" ||
		r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil, "X-Junk", strings.Repeat("a", MaxHeaderBytes-1024)); r.status != 200 {
		t.Errorf("a header under the limit: %d %s", r.status, r.body)
	}
}

type cursorList struct {
	Data       []store.Report `json:"data"`
	Pagination struct {
		Page       *int    `json:"page"`
		Total      int     `json:"total"`
		NextCursor *string `json:"next_cursor"`
	} `json:"pagination"`
}

// TestReportCursors ensures a client following next_cursor sees every
// report once, in the list's order, while reports arrive between pages
// (newer ones before its position, older ones after it), and that the last
// page's next_cursor is null.
func TestReportCursors(t *testing.T) {
	e := newReportEnv(t)
	day := func(d int) time.Time { return time.Date(2026, 10, d, 0, 0, 0, 0, time.UTC) }
	for d := 1; d <= 9; d++ { // 12 reports of A in all
		mustReport(t, e.db, e.a2, day(d), "example.net", sampleRecords()[:1])
	}
	var all []string
	seen := map[string]bool{}
	next := ""
	lastBegin := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	for pages := 0; ; pages++ {
		q := "/api/v1/reports?limit=5"
		if next != "" {
			q += "&cursor=" + url.QueryEscape(next)
		}
		r := e.do("GET", q, e.keyA, nil)
		var l cursorList
		if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		if (next == "") != (l.Pagination.Page != nil) {
			t.Errorf("page is %v on a page reached by cursor %q", l.Pagination.Page, next)
		}
		for _, rep := range l.Data {
			if seen[rep.ID] {
				t.Fatalf("report %s seen twice", rep.ID)
			}
			if rep.DateBegin.After(lastBegin) {
				t.Errorf("order broken at %s", rep.ID)
			}
			seen[rep.ID], lastBegin = true, rep.DateBegin
			all = append(all, rep.ID)
		}
		if pages == 0 {
			// Arrivals between pages: one newer than everything listed,
			// one older than everything.
			mustReport(t, e.db, e.a1, time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), "late.example", sampleRecords()[:1])
			mustReport(t, e.db, e.a1, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), "old.example", sampleRecords()[:1])
		}
		if l.Pagination.NextCursor == nil {
			break
		}
		next = *l.Pagination.NextCursor
		if pages > 10 {
			t.Fatal("cursors never end")
		}
	}
	// 12 at the start, plus the older arrival; the newer one is before the
	// position the client had reached.
	if len(all) != 13 {
		t.Errorf("followed cursors to %d reports, want 13", len(all))
	}
	if r := e.do("GET", "/api/v1/reports?limit=5&cursor="+strings.Repeat("A", 32), e.keyB, nil); r.status != 200 {
		t.Errorf("a well-formed cursor of another list: %d %s", r.status, r.body)
	}
}

// TestFailureCursors ensures the failure report list carries next_cursor
// and resumes from it.
func TestFailureCursors(t *testing.T) {
	e := newFailureEnv(t)
	r := e.do("GET", "/api/v1/forensic-reports?limit=1", e.keyA, nil)
	var l cursorList
	if r.status != 200 || json.Unmarshal(r.body, &l) != nil {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if l.Pagination.Total < 2 || l.Pagination.NextCursor == nil {
		t.Fatalf("need two failure reports and a cursor: %s", r.body)
	}
	first := l.Data[0].ID
	seen := 1
	for next := l.Pagination.NextCursor; next != nil; seen++ {
		r := e.do("GET", "/api/v1/forensic-reports?limit=1&cursor="+*next, e.keyA, nil)
		l = cursorList{}
		if r.status != 200 || json.Unmarshal(r.body, &l) != nil || len(l.Data) != 1 || l.Data[0].ID == first {
			t.Fatalf("%d %s", r.status, r.body)
		}
		next = l.Pagination.NextCursor
	}
	if seen != l.Pagination.Total {
		t.Errorf("followed %d of %d", seen, l.Pagination.Total)
	}
	if r := e.do("GET", "/api/v1/forensic-reports?cursor=AAAA", e.keyA, nil); r.status != 400 || r.errorCode(t) != "bad_request" {
		t.Errorf("bad cursor: %d %s", r.status, r.body)
	}
}
