package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// TestSourcesPagingAndFailingFilter ensures the sources list, sorted by
// messages, pages with Previous/Next (not Newer/Older, which would say
// time), and that "failing only" keeps the sources with failing mail,
// across pages and with the other filters.
func TestSourcesPagingAndFailingFilter(t *testing.T) {
	e := newEnv(t)
	var recs []*store.Record
	for i := range 60 {
		r := senderRecords("alpha.example")[0]
		if i%20 == 7 { // 192.0.2.07, .27, .47 fail
			r = senderRecords("alpha.example")[1]
		}
		r.SourceIP = "192.0.2." + strconv.Itoa(i/10) + strconv.Itoa(i%10)
		r.Count = int64(100 + i)
		recs = append(recs, r)
	}
	mustReport(t, e.db, e.domA, time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), "google.com", recs)
	cookie := e.signIn(e.readA)
	base := "/domains/" + e.domA.ID + "/sources"
	p := e.send("GET", base, cookie, nil)
	if p.status != 200 || !strings.Contains(p.body, "Next ›") || strings.Contains(p.body, "Older") || strings.Contains(p.body, "Newer") {
		t.Errorf("page 1 of sources by messages: %d, pager %q", p.status, between(p.body, `<nav class="pager"`, "</nav>"))
	}
	p = e.send("GET", base+"?page=2", cookie, nil)
	if !strings.Contains(p.body, "‹ Previous") || strings.Contains(p.body, "Newer") {
		t.Errorf("page 2: pager %q", between(p.body, `<nav class="pager"`, "</nav>"))
	}
	if !strings.Contains(p.body, `name="failing"`) {
		t.Error("no failing-only filter on the sources page")
	}
	p = e.send("GET", base+"?failing=1", cookie, nil)
	for _, ip := range []string{"192.0.2.07<", "192.0.2.27<", "192.0.2.47<"} {
		if !strings.Contains(p.body, ip) {
			t.Errorf("failing only lacks %s", ip)
		}
	}
	for _, ip := range []string{"192.0.2.59<", "192.0.2.08<"} {
		if strings.Contains(p.body, ip) {
			t.Errorf("failing only shows %s, which passes", ip)
		}
	}
	if !strings.Contains(p.body, "3 of 60 IPs") || strings.Contains(p.body, "page 1 of") || !strings.Contains(p.body, `name="failing" value="1" checked`) {
		t.Errorf("failing only: %q", between(p.body, "<h1>", "</h1>"))
	}
	// The filter stays on across the date filter's form and the pages.
	p = e.send("GET", base+"?failing=1&from=2026-11-11", cookie, nil)
	if p.status != 200 || strings.Contains(p.body, "192.0.2.07<") {
		t.Errorf("failing only and a later date: %d", p.status)
	}
}

var _ = http.StatusOK
var _ url.Values

// TestOverviewPagerWords ensures the overview's pager says Newer/Older
// for its domains newest first, and Previous/Next once sorted by name.
func TestOverviewPagerWords(t *testing.T) {
	e := newEnv(t)
	for i := range 55 {
		storetest.MustDomain(t, e.db, e.orgA.ID, "d"+strconv.Itoa(i)+".example")
	}
	cookie := e.signIn(e.readA)
	if p := e.send("GET", "/", cookie, nil); !strings.Contains(p.body, "Older ›") {
		t.Errorf("newest first: pager %q", between(p.body, `<nav class="pager"`, "</nav>"))
	}
	if p := e.send("GET", "/?sort=name", cookie, nil); !strings.Contains(p.body, "Next ›") || strings.Contains(p.body, "Older") {
		t.Errorf("by name: pager %q", between(p.body, `<nav class="pager"`, "</nav>"))
	}
}
