package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkReportRecords measures streaming the records of a stored
// 100,000-record report (what the CSV export reads).
func BenchmarkReportRecords(b *testing.B) { benchReportRecords(b, false) }

// BenchmarkReportRecordsSealed is BenchmarkReportRecords with the records
// sealed into blocks (record_seal.go).
func BenchmarkReportRecordsSealed(b *testing.B) { benchReportRecords(b, true) }

func benchReportRecords(b *testing.B, sealed bool) {
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
	if sealed {
		if st, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil || st.Records != n {
			b.Fatal(st, err)
		}
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

// BenchmarkSmallReportSealed measures reading a 50-record report sealed
// in the block of its day with 299 others (15,000 records): a report
// detail page of the common shape.
func BenchmarkSmallReportSealed(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(b, db, org.ID, "example.com")
	var ids []string
	for i := range 300 {
		d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: dom.Name, OrgID: org.ID, ExternalReportID: fmt.Sprint(i),
			DateBegin: storetest.Epoch().Add(-72 * time.Hour), ReceivedAt: storetest.Epoch()})
		if err != nil {
			b.Fatal(err)
		}
		for j := range 50 {
			d.Add(testRecord(i*50 + j))
		}
		d.Finish()
		if _, err := db.NewIngester().Commit(&store.IngestBatch{Reports: []*store.ReportDraft{d}}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, d.ID())
	}
	if st, err := db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil || st.Blocks != 1 {
		b.Fatal(st, err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		count := 0
		if err := db.ReportRecords(org.ID, ids[i%len(ids)], func(*store.Record) error { count++; return nil }); err != nil || count != 50 {
			b.Fatal(count, err)
		}
		i++
	}
}
