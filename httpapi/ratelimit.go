package httpapi

import (
	"math"
	"sync"
	"time"
)

// keyLimiter is a token bucket per API key: capacity limit, refilled at
// limit per minute, so a key may burst its whole minute and then proceeds at
// the steady rate. Time is passed in, never read, so tests drive it.
type keyLimiter struct {
	limit   float64
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// quota is what one request learned about its key's bucket, for the
// X-RateLimit-* headers.
type quota struct {
	allowed    bool
	limit      int
	remaining  int
	reset      time.Time     // when the bucket is full again
	retryAfter time.Duration // until the next token, when not allowed
}

func newKeyLimiter(perMinute int) *keyLimiter {
	return &keyLimiter{limit: float64(perMinute), buckets: map[string]*bucket{}}
}

func (l *keyLimiter) take(key string, now time.Time) quota {
	rate := l.limit / 60 // tokens per second
	l.mu.Lock()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.limit, last: now}
		l.buckets[key] = b
	}
	if elapsed := now.Sub(b.last).Seconds(); elapsed > 0 {
		b.tokens = math.Min(l.limit, b.tokens+elapsed*rate)
		b.last = now
	}
	q := quota{limit: int(l.limit)}
	if b.tokens >= 1 {
		b.tokens--
		q.allowed = true
	} else {
		q.retryAfter = time.Duration((1 - b.tokens) / rate * float64(time.Second))
	}
	q.remaining = int(b.tokens)
	q.reset = now.Add(time.Duration((l.limit - b.tokens) / rate * float64(time.Second)))
	l.mu.Unlock()
	return q
}

// failLimiter counts failed authentications per client address in fixed
// one-minute windows: past max failures the address is refused until its
// window ends, so keys cannot be guessed at speed. Entries of ended windows
// are dropped as the map grows, so a scan from many addresses cannot grow
// it without bound.
type failLimiter struct {
	max    int
	window time.Duration
	mu     sync.Mutex
	addrs  map[string]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

func newFailLimiter(max int) *failLimiter {
	return &failLimiter{max: max, window: time.Minute, addrs: map[string]*failWindow{}}
}

// blocked reports whether addr is over its limit at now, and until when.
func (l *failLimiter) blocked(addr string, now time.Time) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.addrs[addr]
	if w == nil || now.Sub(w.start) >= l.window {
		return false, time.Time{}
	}
	return w.n >= l.max, w.start.Add(l.window)
}

// fail records one failed authentication from addr and returns how many
// its window holds now (1: the first of a window).
func (l *failLimiter) fail(addr string, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.addrs[addr]
	if w == nil || now.Sub(w.start) >= l.window {
		if len(l.addrs) >= 10000 {
			l.prune(now)
		}
		w = &failWindow{start: now}
		l.addrs[addr] = w
	}
	w.n++
	return w.n
}

func (l *failLimiter) prune(now time.Time) {
	for a, w := range l.addrs {
		if now.Sub(w.start) >= l.window {
			delete(l.addrs, a)
		}
	}
}
