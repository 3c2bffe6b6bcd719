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
