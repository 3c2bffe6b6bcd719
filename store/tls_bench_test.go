package store_test

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/tlsrpt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// BenchmarkTLSParseStore measures what import does with TLS reports:
// parse a Microsoft-style report (two policies, two failure details) from
// bytes and store it through the ingest commit, 1,000 reports per
// transaction, each report with its own id so that none is a duplicate. reports/s is the figure of
// issue 14 (target 20,000).
func BenchmarkTLSParseStore(b *testing.B) {
	raw, err := os.ReadFile("../dmarc/tlsrpt/testdata/microsoft.json")
	if err != nil {
		b.Fatal(err)
	}
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(b, db, org.ID, "example.com")
	const batch = 1000
	in := make([]*store.TLSDraft, 0, batch)
	now := time.Now()
	old := []byte(`"133771234567890123+example.com"`)
	n := 0
	ing := db.NewIngester()
	flush := func() {
		if _, err := ing.Commit(&store.IngestBatch{TLS: in}); err != nil {
			b.Fatal(err)
		}
		in = in[:0]
	}
	b.ReportAllocs()
	for b.Loop() {
		n++
		data := bytes.Replace(raw, old, []byte(`"`+strconv.Itoa(n)+`"`), 1)
		r, err := tlsrpt.Parse(bytes.NewReader(data), tlsrpt.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		d, err := store.NewTLSDraft(store.TLSInput{OrgID: org.ID, DomainID: dom.ID, Report: r, ReceivedAt: now})
		if err != nil {
			b.Fatal(err)
		}
		in = append(in, d)
		if len(in) == batch {
			flush()
		}
	}
	if len(in) > 0 {
		flush()
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "reports/s")
}

// BenchmarkTLSStatistics measures a year of statistics for a domain with a
// report every day (the target: under 10 ms).
func BenchmarkTLSStatistics(b *testing.B) {
	db := storetest.Open(b)
	org := storetest.MustOrganization(b, db, "acme", store.PlanUnlimited)
	dom := storetest.MustDomain(b, db, org.ID, "example.com")
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var in []*store.TLSDraft
	for d := range 366 {
		r := tlsReport("G", strconv.Itoa(d), 1, 1000, 10, "certificate-expired", "starttls-not-supported", "sts-webpki-invalid")
		r.DateBegin, r.DateEnd = start.AddDate(0, 0, d), start.AddDate(0, 0, d+1)
		draft, err := store.NewTLSDraft(store.TLSInput{OrgID: org.ID, DomainID: dom.ID, Report: r, ReceivedAt: start})
		if err != nil {
			b.Fatal(err)
		}
		in = append(in, draft)
	}
	if _, err := db.NewIngester().Commit(&store.IngestBatch{TLS: in}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		st, err := db.TLSStatistics(org.ID, dom.ID, start, start.AddDate(0, 0, 365))
		if err != nil || st.ReportCount != 366 {
			b.Fatal(st, err)
		}
	}
}
