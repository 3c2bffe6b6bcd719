//go:build ignore

// Command schema8_records writes schema8-records.db.gz, the older file of
// the migration to sealed record blocks (TestSchema8Migration: schema 8,
// every record in its per-report rows, to 9): run it in a checkout of the
// code before that migration (c14d99c), so that the file is what that
// code wrote:
//
//	git worktree add /tmp/old c14d99c
//	cp store/testdata/schema8_records.go /tmp/old/store/testdata/
//	(cd /tmp/old && go run store/testdata/schema8_records.go -out /tmp/schema8-records.db)
//	gzip -9 -c /tmp/schema8-records.db > store/testdata/schema8-records.db.gz
//
// Its mail: two domains of one organization; six days of reports from
// three reporters of 1, 7 and 40 records, one report of 20,000 records
// (more than one sealed block), and a report of the last day, which the
// file's clock (2026-11-10 12:00 UTC) leaves open. Records vary every
// field the codec stores: IPv4 and IPv6 sources, reasons, envelopes,
// DKIM selectors and SPF scopes, geo.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

func main() {
	out := flag.String("out", "schema8-records.db", "file to write (must not exist)")
	flag.Parse()
	if _, err := os.Stat(*out); err == nil {
		log.Fatalf("%s exists", *out)
	}
	db, err := store.Open(*out, nil)
	if err != nil {
		log.Fatal(err)
	}
	fixed := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return fixed }
	defer db.Close()
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		log.Fatal(err)
	}
	var doms []*store.Domain
	for i, name := range []string{"example.com", "example.org"} {
		addr := fmt.Sprintf("r%d@reports.example.net", i)
		dom := &store.Domain{OrgID: org.ID, Name: name, ReportingEmail: addr, DMARCRecord: "v=DMARC1; p=none; rua=mailto:" + addr}
		if err := db.CreateDomain(dom); err != nil {
			log.Fatal(err)
		}
		doms = append(doms, dom)
	}
	ing := db.NewIngester()
	seed := 0
	add := func(dom *store.Domain, reporter string, begin time.Time, n int) {
		seed++
		d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID,
			OrgName: reporter, OrgEmail: "dmarc@" + reporter, ExternalReportID: fmt.Sprint("r-", seed), DateBegin: begin,
			DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(26 * time.Hour),
			PolicyPublished: store.PolicyPublished{Domain: dom.Name, P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
		if err != nil {
			log.Fatal(err)
		}
		for i := range n {
			d.Add(record(seed, i))
		}
		d.Finish()
		if _, err := ing.Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
			log.Fatal(err)
		}
	}
	for day := range 6 {
		begin := time.Date(2026, 11, 3+day, 0, 0, 0, 0, time.UTC)
		for i, reporter := range []string{"google.com", "yahoo.com", "outlook.com"} {
			add(doms[(day+i)%2], reporter, begin, []int{1, 7, 40}[i])
		}
	}
	add(doms[0], "google.com", time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC), 20000)
	add(doms[1], "google.com", time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), 12)
}

// record is the i-th record of report seed, every field varied.
func record(seed, i int) *store.Record {
	sel, scope, env, comment := "s1", "mfrom", "bounce.example.com", "forwarded"
	ip := fmt.Sprintf("198.51.%d.%d", seed%100, i%250)
	if i%7 == 3 {
		ip = fmt.Sprintf("2001:db8::%x", i%4000)
	}
	r := &store.Record{SourceIP: ip, Count: int64(1 + (i*13+seed)%50), Disposition: []string{"none", "quarantine", "reject"}[i%3],
		DKIM: []store.Verdict{"pass", "fail", ""}[i%3], SPF: []store.Verdict{"pass", "fail"}[(i/3)%2], HeaderFrom: "example.com",
		Reasons: []store.Reason{}, AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{}, SPF: []store.SPFAuth{}}}
	if i%4 == 0 {
		r.EnvelopeFrom = &env
	}
	if i%5 == 0 {
		r.Reasons = append(r.Reasons, store.Reason{Type: "forwarded", Comment: &comment})
	}
	r.AuthResults.DKIM = append(r.AuthResults.DKIM, store.DKIMAuth{Domain: fmt.Sprintf("d%d.example.com", i%9), Selector: &sel, Result: "pass"})
	r.AuthResults.SPF = append(r.AuthResults.SPF, store.SPFAuth{Domain: "example.com", Scope: &scope, Result: []string{"pass", "softfail", "fail"}[i%3]})
	if i%2 == 0 {
		country := "DE"
		asn := uint32(3320 + i%3)
		r.Geo = &store.Geo{CountryCode: &country, ASN: &asn}
	}
	return r
}
