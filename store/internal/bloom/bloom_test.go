package bloom

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// keys returns n random keys of a seeded source.
func keys(seed uint64, n int) [][2]uint64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][2]uint64, n)
	for i := range out {
		out[i] = [2]uint64{rng.Uint64(), rng.Uint64()}
	}
	return out
}

// falsePositives counts the keys of another seed the filter says it may
// hold.
func falsePositives(has func(h1, h2 uint64) bool, n int) int {
	fp := 0
	for _, k := range keys(99, n) {
		if has(k[0], k[1]) {
			fp++
		}
	}
	return fp
}

// TestFilter ensures a filter holds every key added, plain or atomic, and
// answers "maybe" for absent keys at about the rate its size gives: the
// store's two settings, 24 bits and 12 probes (1 in 10,000), 16 bits and
// 2 probes (a few in a hundred).
func TestFilter(t *testing.T) {
	for _, c := range []struct {
		name               string
		bitsPerKey, probes int
		maxRate            float64
	}{
		{"identities", 24, 12, 1.0 / 2000},
		{"sources", 16, 2, 0.03},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 20_000
			plain, shared := New(n, c.bitsPerKey, c.probes), New(n, c.bitsPerKey, c.probes)
			for _, k := range keys(1, n) {
				plain.Add(k[0], k[1])
				shared.AddAtomic(k[0], k[1])
			}
			for _, k := range keys(1, n) {
				if !plain.Has(k[0], k[1]) || !shared.HasAtomic(k[0], k[1]) {
					t.Fatalf("key %x added but not found", k)
				}
			}
			const probes = 200_000
			fp := falsePositives(plain.Has, probes)
			if rate := float64(fp) / probes; rate > c.maxRate {
				t.Errorf("false positive rate %.5f, want at most %.5f", rate, c.maxRate)
			}
			if fp != falsePositives(shared.HasAtomic, probes) {
				t.Error("the atomic filter answers otherwise than the plain one")
			}
			if want := int64(n*c.bitsPerKey+511) / 512 * 64; plain.Bytes() != want {
				t.Errorf("%d bytes, want %d", plain.Bytes(), want)
			}
		})
	}
	if !New(10, 16, 0).Has(1, 2) {
		t.Error("a filter that probes no bit is sure of something")
	}
	empty := New(0, 16, 2)
	if empty.Bytes() != 64 || empty.Has(1, 2) {
		t.Errorf("an empty filter: %d bytes, has a key: %v", empty.Bytes(), empty.Has(1, 2))
	}
}

// TestGrowing ensures a growing filter keeps every key across its growth,
// counts them, and stays near its rate: each segment is filled to its
// capacity at most.
func TestGrowing(t *testing.T) {
	g := NewGrowing(1000, 24, 12)
	first := g.Bytes()
	ks := keys(2, 7000) // 1,000 + 2,000 + 4,000: three segments
	for _, k := range ks {
		g.Add(k[0], k[1])
	}
	for _, k := range ks {
		if !g.Has(k[0], k[1]) {
			t.Fatalf("key %x lost as the filter grew", k)
		}
	}
	if g.Len() != int64(len(ks)) || g.Bytes() < 7*first || g.Bytes() > 8*first {
		t.Errorf("len %d, %d bytes; want %d keys in about 7 times %d bytes", g.Len(), g.Bytes(), len(ks), first)
	}
	if fp := falsePositives(g.Has, 100_000); fp > 3*100_000/2000 {
		t.Errorf("%d false positives in 100,000 over three segments", fp)
	}
}

// TestGrowingConcurrent ensures adds from several goroutines while others
// look keys up lose none and grow the filter once per segment (run with
// -race).
func TestGrowingConcurrent(t *testing.T) {
	g := NewGrowing(100, 24, 12)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for _, k := range keys(uint64(10+w), 2000) {
				g.Add(k[0], k[1])
				g.Has(k[1], k[0])
			}
		})
	}
	wg.Wait()
	for w := range 4 {
		for _, k := range keys(uint64(10+w), 2000) {
			if !g.Has(k[0], k[1]) {
				t.Fatalf("key %x of writer %d lost", k, w)
			}
		}
	}
	if g.Len() != 8000 {
		t.Errorf("len %d, want 8000", g.Len())
	}
	// Capacities 100, 200, ... 6400: every segment but the last is full,
	// past its capacity by at most an add per writer racing the check.
	for _, s := range *g.segs.Load() {
		if s.n.Load() > s.capacity+4 {
			t.Errorf("a segment of capacity %d holds %d keys", s.capacity, s.n.Load())
		}
	}
}
