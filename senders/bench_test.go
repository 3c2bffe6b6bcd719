package senders

import (
	"context"
	"fmt"
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// benchEnv holds 10,000 distinct sources over 30 days for one domain: 300
// regular senders every day (named, a third known services) and 9,700
// spoofing IPs seen on one day each.
func benchEnv(b *testing.B) *viewEnv {
	e := newViewEnv(b, "v=DMARC1; p=none; rua=mailto:d@reports.example.net")
	var names []store.RDNSEntry
	for i := range 300 {
		ip := fmt.Sprintf("198.51.%d.%d", i/250, i%250)
		host := fmt.Sprintf("o%d.host%d.example", i, i%40)
		if i%3 == 0 {
			host = fmt.Sprintf("o%d.sendgrid.net", i)
		}
		names = append(names, store.RDNSEntry{IP: ip, Status: store.RDNSConfirmed, Hostname: host, CheckedAt: t0})
	}
	if err := e.db.PutRDNS(names); err != nil {
		b.Fatal(err)
	}
	for d := range 30 {
		var recs []*store.Record
		for i := range 300 {
			recs = append(recs, rec(fmt.Sprintf("198.51.%d.%d", i/250, i%250), 20, "pass", "pass", "example.com", "example.com"))
		}
		for i := range 9700 / 30 {
			n := d*(9700/30) + i
			recs = append(recs, rec(fmt.Sprintf("10.%d.%d.%d", n>>16, (n>>8)&255, n&255), 3, "fail", "fail", "spoof.example", ""))
		}
		e.n++
		ingestSources(b, e.db, e.dom, fmt.Sprint("r", e.n), t0.AddDate(0, 0, d), recs)
	}
	return e
}

// BenchmarkSenders is /senders over 10,000 sources and 30 days (target
// under 50 ms an operation).
func BenchmarkSenders(b *testing.B) {
	e := benchEnv(b)
	for b.Loop() {
		gs, err := e.v.Senders(context.Background(), e.org.ID, e.dom.ID, t0, e.to())
		if err != nil || len(gs) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkPolicyAdvice is /policy-advice on the same data.
func BenchmarkPolicyAdvice(b *testing.B) {
	e := benchEnv(b)
	for b.Loop() {
		a, err := e.v.PolicyAdvice(context.Background(), e.org.ID, e.dom.ID, t0, e.to())
		if err != nil || a.Stage != StageReadyForQuarantine {
			b.Fatal(err, a)
		}
	}
}
