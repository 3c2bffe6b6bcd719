package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// BenchmarkSourceDay measures reading the sources of one busy day (about
// 6,000 sources from 30 reports), merged by IP as the sources and senders
// views do, its roll-ups plain: 30 segments.
func BenchmarkSourceDay(b *testing.B) { benchSourceDay(b, false) }

// BenchmarkSourceDaySealed is BenchmarkSourceDay with the day's roll-ups
// sealed (rollup_seal.go): one compressed segment.
func BenchmarkSourceDaySealed(b *testing.B) { benchSourceDay(b, true) }

// BenchmarkDomainStatistics measures the statistics of 20 days of 30
// reports each (DomainStatistics decodes each day's roll-up), plain.
func BenchmarkDomainStatistics(b *testing.B) { benchDomainStatistics(b, false) }

// BenchmarkDomainStatisticsSealed is BenchmarkDomainStatistics with the
// days' roll-ups sealed.
func BenchmarkDomainStatisticsSealed(b *testing.B) { benchDomainStatistics(b, true) }

// benchRollupEnv stores 30 reports of 400 records on each of days days
// from the 5th on, their sources spread over about 6,000 addresses a day,
// and seals them when sealed.
func benchRollupEnv(b *testing.B, days int, sealed bool) *reportEnv {
	e := newReportEnv(b)
	for d := range days {
		for i := range 30 {
			dr := rollupDraft(b, e, fmt.Sprint(d, "-", i), reportDay(5+d), i*200, 400)
			dr.Finish()
			if _, err := e.ing.Commit(&store.IngestBatch{Reports: []*store.ReportDraft{dr}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if sealed {
		if _, err := e.db.SealRecords(context.Background(), store.SealOptions{All: true}); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

func benchSourceDay(b *testing.B, sealed bool) {
	e := benchRollupEnv(b, 1, sealed)
	b.ReportAllocs()
	for b.Loop() {
		ips := map[string]*store.SourceRollup{}
		err := e.db.EachSourceDay(e.org.ID, e.dom.ID, reportDay(5), reportDay(5), func(_ time.Time, s *store.SourceRollup) {
			if g := ips[s.SourceIP]; g != nil {
				g.Merge(s)
			} else {
				ips[s.SourceIP] = s
			}
		})
		if err != nil || len(ips) < 1000 {
			b.Fatal(len(ips), err)
		}
	}
}

func benchDomainStatistics(b *testing.B, sealed bool) {
	e := benchRollupEnv(b, 20, sealed)
	b.ReportAllocs()
	for b.Loop() {
		st, err := e.db.DomainStatistics(e.org.ID, e.dom.ID, reportDay(1), reportDay(30))
		if err != nil || st.ReportCount != 600 {
			b.Fatal(err)
		}
	}
}
