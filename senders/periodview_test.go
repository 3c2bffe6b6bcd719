package senders

import (
	"github.com/dmarcd/dmarcd/store"

	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// TestPeriodEqualsSeparateViews: Period's groups and advice, from one
// read over two overlapping windows, are what Senders and PolicyAdvice
// answer over each window alone, and its keys before the period those of
// Senders over the advice window's days before it.
func TestPeriodEqualsSeparateViews(t *testing.T) {
	e := newViewEnv(t, "v=DMARC1; p=none; rua=mailto:d@reports.example.net")
	for d := range 40 {
		recs := []*store.Record{
			rec("198.51.100.1", 50, "pass", "pass", "example.com", "example.com"),
			rec(fmt.Sprintf("203.0.113.%d", d), 3, "fail", "fail", "spoof.example", ""),
		}
		if d >= 35 { // a sender new in the period
			recs = append(recs, rec("192.0.2.20", 5, "fail", "pass", "mcsv.net", "mcsv.net"))
		}
		if d < 20 {
			recs = append(recs, rec("192.0.2.7", 9, "fail", "pass", "sendgrid.net", "sendgrid.net"))
		} else {
			recs = append(recs, rec("192.0.2.9", 7, "pass", "fail", "amazonses.com", "example.com"))
		}
		e.n++
		ingestSources(t, e.db, e.dom, fmt.Sprint("p", e.n), t0.AddDate(0, 0, d), recs)
	}
	ctx := context.Background()
	period := Window{t0.AddDate(0, 0, 33), t0.AddDate(0, 0, 39)}
	advice := Window{t0.AddDate(0, 0, 10), t0.AddDate(0, 0, 39)}
	before := Window{advice.From, period.From.AddDate(0, 0, -1)}
	pv, err := e.v.Period(ctx, e.org.ID, e.dom.ID, period, advice)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got, want any) {
		t.Helper()
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if string(g) != string(w) {
			t.Errorf("%s:\n got %s\nwant %s", what, g, w)
		}
	}
	gs, err := e.v.Senders(ctx, e.org.ID, e.dom.ID, period.From, period.To)
	if err != nil {
		t.Fatal(err)
	}
	same("period groups", pv.Groups, gs)
	bs, err := e.v.Senders(ctx, e.org.ID, e.dom.ID, before.From, before.To)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, g := range bs {
		keys[g.Key()] = true
	}
	same("keys before the period", pv.Before, keys)
	newOnes := 0
	for _, g := range pv.Groups {
		if !pv.Before[g.Key()] {
			newOnes++
		}
	}
	if newOnes == 0 {
		t.Error("no group of the period is new: the test proves nothing")
	}
	adv, err := e.v.PolicyAdvice(ctx, e.org.ID, e.dom.ID, advice.From, advice.To)
	if err != nil {
		t.Fatal(err)
	}
	same("advice", pv.Advice, adv)
}
