package geo_test

import (
	"net/netip"
	"testing"

	"github.com/dmarcd/dmarcd/geo"
)

// benchAddrs mixes found and unknown, IPv4 and IPv6 addresses, as the
// source IPs of DMARC reports do.
var benchAddrs = []netip.Addr{
	addr("81.2.69.142"), addr("89.160.20.112"), addr("216.160.83.56"), addr("2001:480:10::1"),
	addr("10.0.0.1"), addr("209.85.222.182"), addr("::ffff:81.2.69.142"), addr("1.0.0.1"),
}

// BenchmarkLookup measures one lookup in a City and an ASN database; the
// one allocation is the returned Info.
func BenchmarkLookup(b *testing.B) {
	db := mustOpen(b, geo.Config{CityPath: cityDB, ASNPath: asnDB})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if db.Lookup(benchAddrs[i%len(benchAddrs)]) == nil {
			b.Fatal("nil Info")
		}
		i++
	}
}

// BenchmarkLookupParallel measures lookups from all cores at once, which
// contend on the reference count that guards Reload.
func BenchmarkLookupParallel(b *testing.B) {
	db := mustOpen(b, geo.Config{CityPath: cityDB, ASNPath: asnDB})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if db.Lookup(benchAddrs[i%len(benchAddrs)]) == nil {
				b.Error("nil Info")
				return
			}
			i++
		}
	})
}

// BenchmarkLookupNoDatabase measures the cost callers pay with geo disabled.
func BenchmarkLookupNoDatabase(b *testing.B) {
	db := mustOpen(b, geo.Config{})
	b.ReportAllocs()
	for b.Loop() {
		if db.Lookup(benchAddrs[0]) != nil {
			b.Fatal("Info without a database")
		}
	}
}
