package store_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// BenchmarkIngestCommit measures the store's side of ingest: drafts of 50
// records from 2,000 reports (random sources in a few /16s, geolocated,
// two auth results each) added, finished and committed 64 reports a
// transaction, as the pipeline's writer does. It isolates the cost of the
// roll-ups kept at ingest (the daily one and the per-source one) from
// parsing and fsync noise: run it with the file on tmpfs (TMPDIR=/dev/shm).
func BenchmarkIngestCommit(b *testing.B) { benchIngestCommit(b, 2000, 50, 64) }

// BenchmarkIngestCommitSmall is BenchmarkIngestCommit with the reports of
// ingestbench's small scenario: 20,000 of 5 records, about 100 a commit,
// where the per-report costs of the roll-ups (a report's segment entries,
// a domain-day's segment and queue entry) weigh the most.
func BenchmarkIngestCommitSmall(b *testing.B) { benchIngestCommit(b, 20000, 5, 100) }

// benchIngestCommit stores reports drafts of records each, perCommit a
// transaction.
func benchIngestCommit(b *testing.B, reports, records, perCommit int) {
	cc, org := "US", "Example Net"
	asn := uint32(64500)
	geo := &store.Geo{CountryCode: &cc, ASN: &asn, ASOrg: &org}
	prefixes := []string{"209.85", "74.125", "40.107", "167.89", "54.240", "198.2", "185.220"}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		db, err := store.Open(filepath.Join(b.TempDir(), "dmarcd.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		o, err := db.CreateOrganization("bench", store.PlanUnlimited)
		if err != nil {
			b.Fatal(err)
		}
		dom := &store.Domain{OrgID: o.ID, Name: "example.com", ReportingEmail: "r@reports.test", DMARCRecord: "v=DMARC1; p=none"}
		if err := db.CreateDomain(dom); err != nil {
			b.Fatal(err)
		}
		ing := db.NewIngester()
		rng := rand.New(rand.NewPCG(1, 2))
		b.StartTimer()
		var batch []*store.ReportDraft
		for i := range reports {
			begin := time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i*365/reports)
			d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: o.ID,
				OrgName: "google.com", ExternalReportID: fmt.Sprint(i), DateBegin: begin,
				DateEnd: begin.Add(24*time.Hour - time.Second), ReceivedAt: begin.Add(25 * time.Hour)})
			if err != nil {
				b.Fatal(err)
			}
			for range records {
				r := &store.Record{SourceIP: fmt.Sprintf("%s.%d.%d", prefixes[rng.IntN(len(prefixes))], rng.IntN(256), rng.IntN(256)),
					Count: int64(1 + rng.IntN(6)), Disposition: "none", DKIM: "pass", SPF: "pass", HeaderFrom: "example.com", Geo: geo,
					AuthResults: store.AuthResults{DKIM: []store.DKIMAuth{{Domain: "example.com", Result: "pass"}},
						SPF: []store.SPFAuth{{Domain: "example.com", Result: "pass"}}}}
				if rng.IntN(5) == 0 {
					r.DKIM, r.AuthResults.DKIM[0].Domain = "fail", "sendgrid.net"
				}
				d.Add(r)
			}
			d.Finish()
			if batch = append(batch, d); len(batch) == perCommit || i == reports-1 {
				if _, err := ing.Commit(&store.IngestBatch{Reports: batch}); err != nil {
					b.Fatal(err)
				}
				batch = nil
			}
		}
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(reports*records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
