package webhook_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/webhook"
)

// BenchmarkSign measures signing a typical alert delivery body.
func BenchmarkSign(b *testing.B) {
	body, err := webhook.Encode(testEvent(b))
	if err != nil {
		b.Fatal(err)
	}
	secret := webhook.NewSecret()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		webhook.Sign(secret, 1767225600, body)
	}
}

// BenchmarkDeliver measures signed deliveries to a local HTTPS receiver
// from parallel senders sharing one Client (connections kept alive), and
// reports deliveries per second. The receiver answers 204 without checks so
// that the client side is what is measured.
func BenchmarkDeliver(b *testing.B) {
	secret := webhook.NewSecret()
	rc := newReceiver(b, secret)
	rc.handle = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(webhook.HeaderSignature) == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
	c := privateClient(b, rc, dnstest.Start(b))
	defer c.CloseIdleConnections()
	body, err := webhook.Encode(testEvent(b))
	if err != nil {
		b.Fatal(err)
	}
	id := testEventID
	b.SetParallelism(4) // bounded concurrency, as the worker's fan-out
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := c.DeliverBody(context.Background(), rc.srv.URL, secret, id, body, time.Now()); !res.Success {
				b.Errorf("delivery failed: %s", errText(res))
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}
