//go:build ignore

// Command schema6_sources writes schema6-sources.db.gz, the older file of
// the evidence migration's test (TestEvidenceMigration: schema 6, before
// the evidence, to 8):
// run it in a checkout of the code before that migration (a6dffcc), so
// that the file is what that code wrote:
//
//	git worktree add /tmp/old a6dffcc
//	cp store/testdata/schema6_sources.go /tmp/old/store/testdata/
//	(cd /tmp/old && go run store/testdata/schema6_sources.go -out /tmp/schema6-sources.db)
//	gzip -9 -c /tmp/schema6-sources.db > store/testdata/schema6-sources.db.gz
//
// Its mail: one domain, example.com, with two daily reports. A SendGrid
// address signing for example.com and sendgrid.net; one signing for
// sendgrid.net only (DKIM not aligned); Amazon SES by SPF and DKIM;
// Mailchimp by DKIM with a failing SPF; a spoofer failing every claim of
// example.com; and an address whose SPF results fill the eight (kind,
// domain, result) entries schema 6 kept per source and day, so that its
// later DKIM signature of sendgrid.net was dropped there.
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
	out := flag.String("out", "schema6-sources.db", "file to write (must not exist)")
	flag.Parse()
	if _, err := os.Stat(*out); err == nil {
		log.Fatalf("%s exists", *out)
	}
	db, err := store.Open(*out, nil)
	if err != nil {
		log.Fatal(err)
	}
	fixed := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return fixed }
	defer db.Close()
	org, err := db.CreateOrganization("acme", store.PlanUnlimited)
	if err != nil {
		log.Fatal(err)
	}
	dom := &store.Domain{OrgID: org.ID, Name: "example.com", ReportingEmail: "r1@reports.example.net",
		DMARCRecord: "v=DMARC1; p=none; rua=mailto:r1@reports.example.net"}
	if err := db.CreateDomain(dom); err != nil {
		log.Fatal(err)
	}
	if _, err := db.UpdateDomain(org.ID, dom.ID, func(d *store.Domain) error {
		d.Status, d.LastDNSRecord = store.DomainActive, "v=DMARC1; p=none; rua=mailto:r1@reports.example.net"
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	for day := range 2 {
		begin := time.Date(2026, 11, 1+day, 0, 0, 0, 0, time.UTC)
		d, err := store.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID,
			OrgName: "google.com", ExternalReportID: fmt.Sprint("old-", day), DateBegin: begin,
			DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(25 * time.Hour),
			PolicyPublished: store.PolicyPublished{Domain: "example.com", P: "none", PCT: 100, ADKIM: "r", ASPF: "r"}})
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range records() {
			d.Add(r)
		}
		d.Finish()
		if _, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
			log.Fatal(err)
		}
	}
}

var selector, scope = "s1", "mfrom"

func rec(ip string, count int64, dkim, spf string, dkims, spfs [][2]string) *store.Record {
	r := &store.Record{SourceIP: ip, Count: count, Disposition: "none", DKIM: dkim, SPF: spf, HeaderFrom: "example.com"}
	for _, a := range dkims {
		r.AuthResults.DKIM = append(r.AuthResults.DKIM, store.DKIMAuth{Domain: a[0], Selector: &selector, Result: a[1]})
	}
	for _, a := range spfs {
		r.AuthResults.SPF = append(r.AuthResults.SPF, store.SPFAuth{Domain: a[0], Scope: &scope, Result: a[1]})
	}
	return r
}

func records() []*store.Record {
	out := []*store.Record{
		rec("198.51.100.1", 40, "pass", "fail", [][2]string{{"example.com", "pass"}, {"SendGrid.net", "pass"}}, [][2]string{{"sendgrid.net", "pass"}}),
		rec("198.51.100.2", 12, "fail", "fail", [][2]string{{"sendgrid.net", "pass"}}, [][2]string{{"em1.sendgrid.net", "pass"}}),
		rec("54.240.1.1", 25, "pass", "fail", [][2]string{{"example.com", "pass"}, {"amazonses.com", "pass"}}, [][2]string{{"amazonses.com", "pass"}}),
		rec("198.2.1.1", 9, "fail", "fail", [][2]string{{"mcsv.net", "pass"}}, [][2]string{{"mcsv.net", "softfail"}}),
		rec("203.0.113.66", 30, "fail", "fail", [][2]string{{"example.com", "fail"}}, [][2]string{{"example.com", "fail"}}),
	}
	for _, res := range []string{"pass", "softfail", "fail", "neutral", "none", "temperror", "permerror"} {
		out = append(out, rec("192.0.2.9", 2, "fail", "fail", nil, [][2]string{{"example.com", res}}))
	}
	out = append(out, rec("192.0.2.9", 3, "fail", "pass", nil, [][2]string{{"bounces.example.com", "pass"}}),
		rec("192.0.2.9", 5, "pass", "fail", [][2]string{{"sendgrid.net", "pass"}, {"example.com", "pass"}}, nil))
	return out
}
