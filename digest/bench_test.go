package digest_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/ingesttest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// Benchmark sizes: issue 27's goal is the digests of 200 organizations
// of 5 domains each built in under 10 s in total.
const (
	benchOrgs    = 200
	benchDomains = 5
	benchDays    = 30 // a report a day per domain: the advice and look-back windows
	benchRecords = 40 // rows per report, from reportgen's mix of senders
)

// benchStore is a store with benchOrgs organizations of benchDomains
// domains, each with a report a day for benchDays days before now.
func benchStore(b *testing.B) (*store.DB, []string) {
	db := storetest.Open(b)
	p, stop := ingesttest.Start(b, ingest.Config{Store: db})
	defer stop()
	type job struct {
		org  string
		name string
		seed int64
		day  time.Time
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var failed error
	var mu sync.Mutex
	for range 8 { // the pipeline's writer batches concurrent inputs into one commit
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				xml := reportgen.Generate(j.seed, benchRecords, reportgen.Options{Domain: j.name, ReportID: fmt.Sprint("r", j.seed), Begin: j.day})
				if _, err := p.Ingest(context.Background(), bytes.NewReader(xml), ingest.Arrival{Source: ingest.SourceImport, OrgID: j.org, Name: "r.xml"}); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		}()
	}
	var orgs []string
	seed := int64(0)
	today := now.UTC().Truncate(24 * time.Hour)
	for o := range benchOrgs {
		org, err := db.CreateOrganization(fmt.Sprintf("org%03d", o), store.PlanUnlimited)
		if err != nil {
			b.Fatal(err)
		}
		orgs = append(orgs, org.ID)
		for d := range benchDomains {
			name := fmt.Sprintf("brand%d-%03d.example", d, o)
			if err := db.CreateDomain(&store.Domain{OrgID: org.ID, Name: name, ReportingEmail: fmt.Sprintf("o%dd%d@reports.test", o, d),
				DMARCRecord: "v=DMARC1; p=none", LastDNSRecord: "v=DMARC1; p=none; rua=mailto:x@reports.test"}); err != nil {
				b.Fatal(err)
			}
			for day := 1; day <= benchDays; day++ {
				seed++
				jobs <- job{org: org.ID, name: name, seed: seed, day: today.AddDate(0, 0, -day)}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return db, orgs
}

// cpuTime is the CPU time the process has used: on a shared machine it
// says what the digests cost where the wall clock also counts the waits
// for a core.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDigests builds and renders the weekly and the daily digest of
// every organization (200 × 5 domains): one op is all 200 of one period;
// the goal is under 10 s.
func BenchmarkDigests(b *testing.B) {
	db, orgs := benchStore(b)
	for _, p := range []digest.Period{digest.Week, digest.Day} {
		b.Run(string(p), func(b *testing.B) {
			builder := &digest.Builder{DB: db}
			var bytes int
			start := cpuTime(b)
			for b.Loop() {
				bytes = 0
				for _, org := range orgs {
					d, err := builder.Build(context.Background(), org, p, now)
					if err != nil {
						b.Fatal(err)
					}
					m, err := digest.Render(d, digest.RenderOptions{PublicURL: "https://dmarc.example.net"})
					if err != nil {
						b.Fatal(err)
					}
					bytes += len(m.Text) + len(m.HTML)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(bytes)/float64(len(orgs)), "bytes/digest")
		})
	}
}
