package worker

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// idleDomains is how many domains the idle benchmark watches.
const idleDomains = 10_000

// cpuTime returns the CPU time (user + system) this process used so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleRig is a store of 10,000 active domains whose records are published
// on a loopback DNS server and already known to change detection: the
// steady state of a large installation.
type idleRig struct {
	db  *store.DB
	res *dnscheck.Resolver
}

func newIdleRig(b *testing.B) *idleRig {
	b.Helper()
	// One fsync per domain write would make the set-up take minutes; the
	// steady state measured writes nothing but the retention job's empty
	// commits.
	db := storetest.OpenWithOptions(b, storetest.NewClock(storetest.Epoch()), &store.Options{NoSync: true})
	ns := dnstest.Start(b)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: time.Second, Attempts: 1})
	if err != nil {
		b.Fatal(err)
	}
	org := storetest.MustOrganization(b, db, "big", store.PlanUnlimited)
	for i := range idleDomains {
		d := storetest.MustDomain(b, db, org.ID, fmt.Sprintf("d%05d.example", i))
		rec := "v=DMARC1; p=reject; rua=mailto:" + d.ReportingEmail
		ns.SetTXT("_dmarc."+d.Name, []string{rec})
		if _, err := db.UpdateDomain(org.ID, d.ID, func(d *store.Domain) error {
			d.Status, d.LastDNSRecord = store.DomainActive, rec
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return &idleRig{db: db, res: res}
}

// jobs returns the scheduler's jobs of this package with the real
// intervals of `dmarcd serve`.
func (r *idleRig) jobs() []Job {
	reverify := &Reverify{Store: r.db, Checker: &dnscheck.Checker{Resolver: r.res}}
	return []Job{
		{Name: "reverify", Every: DefaultVerifyInterval, AtStart: true, Run: reverify.Run},
		(&DNSWatch{Store: r.db, Resolver: r.res, Interval: DefaultDNSCheckInterval}).Job(),
		(&Retention{Store: r.db, Retention: DefaultRetention}).Job(),
	}
}

// BenchmarkSchedulerIdle measures the CPU the scheduler costs with 10,000
// domains and the default intervals, two ways (the DNS server answering
// change detection runs in this process and is counted too):
//
//   - idle-cpu-%: the process's CPU time (getrusage) over 30 s of a running
//     scheduler, after its start-up runs, as a share of one core;
//   - steady-cpu-%: each job's CPU per run divided by its period, summed
//     (dns-watch: one minute's share of the 6 h cycle, about 28 lookups;
//     reverify every 15 min; retention hourly): what the scheduler costs
//     on average over hours, which a 30 s window may not show.
//
// Run it alone: go test -run - -bench SchedulerIdle -benchtime 1x ./worker
func BenchmarkSchedulerIdle(b *testing.B) {
	r := newIdleRig(b)
	window := 30 * time.Second
	if testing.Short() {
		window = 5 * time.Second
	}
	for b.Loop() {
		started := make(chan string, 8)
		s := New(nil, nil)
		s.Observe(func(job string, _ time.Duration, err error) {
			if err != nil {
				b.Errorf("job %s failed: %v", job, err)
			}
			started <- job
		})
		for _, j := range r.jobs() {
			s.Add(j)
		}
		ctx, cancel := context.WithCancel(b.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		<-started // reverify and retention run at start
		<-started
		cpu0, wall0 := cpuTime(b), time.Now()
		time.Sleep(window)
		cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
		cancel()
		<-done
		b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "idle-cpu-%")

		var steady float64
		for _, j := range r.jobs() {
			const runs = 3
			c0 := cpuTime(b)
			for i := range runs {
				if err := j.Run(b.Context(), storetest.Epoch().Add(time.Duration(i+1)*j.Every)); err != nil {
					b.Fatal(err)
				}
			}
			per := (cpuTime(b) - c0) / runs
			steady += per.Seconds() / j.Every.Seconds()
			b.ReportMetric(float64(per.Microseconds())/1000, j.Name+"-cpu-ms/run")
		}
		b.ReportMetric(100*steady, "steady-cpu-%")
	}
}
