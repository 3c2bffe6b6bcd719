package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/dmarc/aggregate"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/geo"
)

// floor is the minimal pipeline the ingest path is measured against:
// dmarcd's own parser (containers, streaming XML), a geolocation lookup per
// record (cached per input as the pipeline does), and the records appended
// as bytes to one bbolt bucket by a single writer in fsync'd transactions
// of up to 20,000 records. No routing, dedup, summaries, roll-ups, alerts
// or results: what any store of these reports must do at least. It returns
// the records, the seconds taken and the process CPU seconds used.
func floor(inputs [][]byte, workers int, g *geo.DB) (int, float64, float64, error) {
	dir, err := os.MkdirTemp("", "ingestbench-floor")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "floor.db"), 0o600, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer db.Close()
	blocks := make(chan []byte, 64)
	var records atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		var seq uint64
		for first := range blocks {
			pending := [][]byte{first}
			n := binary.BigEndian.Uint32(first)
		more:
			for n < 20000 {
				select {
				case b, ok := <-blocks:
					if !ok {
						break more
					}
					pending = append(pending, b)
					n += binary.BigEndian.Uint32(b)
				default:
					break more
				}
			}
			err := db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucketIfNotExists([]byte("records"))
				if err != nil {
					return err
				}
				b.FillPercent = 0.95
				for _, v := range pending {
					seq++
					if err := b.Put(binary.BigEndian.AppendUint64(nil, seq), v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				writerDone <- err
				for range blocks {
				}
				return
			}
		}
		writerDone <- nil
	}()
	cpu0 := cpuSeconds()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cache := map[netip.Addr]*geo.Info{}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(inputs) {
					return
				}
				clear(cache)
				_ = aggregate.Extract(bytes.NewReader(inputs[i]), container.Limits{}, func(p container.Payload) error {
					ar, err := aggregate.NewReader(p.Body, container.Limits{})
					if err != nil {
						return nil
					}
					defer ar.Release() // as the pipeline does
					buf := make([]byte, 4, 4096)
					n := uint32(0)
					for {
						r, err := ar.Next()
						if err == io.EOF {
							break
						}
						if err != nil {
							return nil
						}
						info, ok := cache[r.SourceIP]
						if !ok {
							info = g.Lookup(r.SourceIP)
							cache[r.SourceIP] = info
						}
						ip := r.SourceIP.As16()
						buf = append(buf, ip[:]...)
						buf = binary.AppendVarint(buf, r.Count)
						buf = append(buf, r.Disposition...)
						buf = append(buf, r.DKIM...)
						buf = append(buf, r.SPF...)
						buf = append(buf, r.HeaderFrom...)
						for _, d := range r.DKIMResults {
							buf = append(buf, d.Domain...)
							buf = append(buf, d.Result...)
						}
						for _, s := range r.SPFResults {
							buf = append(buf, s.Domain...)
							buf = append(buf, s.Result...)
						}
						if info != nil && info.CountryCode != nil {
							buf = append(buf, *info.CountryCode...)
						}
						n++
						if n == 64 || len(buf) >= 16<<10 {
							binary.BigEndian.PutUint32(buf, n)
							blocks <- buf
							records.Add(int64(n))
							buf, n = make([]byte, 4, 4096), 0
						}
					}
					if n > 0 {
						binary.BigEndian.PutUint32(buf, n)
						blocks <- buf
						records.Add(int64(n))
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	close(blocks)
	err = <-writerDone
	return int(records.Load()), since(start), cpuSeconds() - cpu0, err
}

// cpuSeconds is the CPU time (user and system) this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
