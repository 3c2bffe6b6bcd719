package store_test

import (
	"testing"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkReportRecords measures streaming the records of a stored
// 100,000-record report (what the CSV export reads).
func BenchmarkReportRecords(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(b, db, org.ID, "example.com")
	d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID, ReceivedAt: storetest.Epoch()})
	if err != nil {
		b.Fatal(err)
	}
	const n = 100_000
	for i := range n {
		r := testRecord(i)
		r.EnvelopeFrom = new("bounces.example.com")
		r.Geo = &store.Geo{CountryCode: new("GB"), CountryName: new("United Kingdom"), City: new("London"),
			Latitude: new(51.5), Longitude: new(-0.1), ASN: new(uint32(20712)), ASOrg: new("Andrews & Arnold Ltd")}
		d.Add(r)
	}
	d.Finish()
	if _, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		count := 0
		if err := db.ReportRecords(org.ID, d.ID(), func(*store.Record) error { count++; return nil }); err != nil || count != n {
			b.Fatal(count, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
}
