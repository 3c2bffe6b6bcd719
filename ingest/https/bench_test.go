package https

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// BenchmarkPostTLS measures TLS reports POSTed over HTTPS on loopback (a
// real TLS server, 32 clients on kept-alive connections), each a
// Microsoft-style report with its own id, gzip-compressed as
// application/tlsrpt+gzip, acknowledged (201) once stored. reports/s is
// issue 14's HTTPS figure (target 2,000).
func BenchmarkPostTLS(b *testing.B) {
	const clients = 32
	s := newServer(b, Config{RateLimit: 1 << 30})
	s.client.Transport.(*http.Transport).MaxIdleConnsPerHost = clients
	raw := testdata(b, "microsoft.json")
	old := []byte(`"133771234567890123+example.com"`)
	per := (b.N + clients - 1) / clients
	// The bodies are compressed before the clock starts: the reporters'
	// work is not dmarcd's.
	bodies := make([][]byte, per*clients)
	for i := range bodies {
		bodies[i] = gz(b, bytes.Replace(raw, old, []byte(`"`+strconv.Itoa(i)+`"`), 1))
	}
	var seq atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range per {
				body := bodies[seq.Add(1)-1]
				resp, err := s.client.Post(s.srv.URL+PathPrefix+"abc", "application/tlsrpt+gzip", bytes.NewReader(body))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(per*clients)/b.Elapsed().Seconds(), "reports/s")
}
