// Command failurebench measures failure report intake and the summary
// endpoint of failure reports, each beside a baseline, in one run:
//
//   - intake: an mbox of -mails generated RFC 6591 report mails (one small
//     report each) imported through the ingest pipeline (parse, route,
//     geolocate, dedup, store with fsync'd group commits) by -workers
//     concurrent Ingest calls, as `dmarcd import` does; the baseline is the
//     same mails parsed alone (arf.Extract) on every core.
//     Target: >= 2,000 reports stored per second.
//   - summary: GET /api/v1/forensic-reports/summary over HTTP (loopback,
//     in-process server) once the database holds -stored failure reports
//     spread over the 7 days of the window; the baseline is the same
//     server's /healthz. Target: < 50 ms (the slowest of -requests calls).
//
// Results are printed as a table; -json also writes them as JSON lines.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/dmarcd/dmarcd/bench/internal/jsonl"
	"github.com/dmarcd/dmarcd/dmarc/arf"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/geo"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
	"github.com/dmarcd/dmarcd/store"
)

// result is one measured figure.
type result struct {
	Metric   string  `json:"metric"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline float64 `json:"baseline,omitempty"`
	BaseName string  `json:"baseline_name,omitempty"`
	Target   string  `json:"target,omitempty"`
	Pass     *bool   `json:"pass,omitempty"`
	Note     string  `json:"note,omitempty"`
}

type config struct {
	mails, stored, requests, workers, domains int
	geoDir                                    string
}

func main() {
	var cfg config
	flag.IntVar(&cfg.mails, "mails", 20000, "report mails in the generated mbox")
	flag.IntVar(&cfg.stored, "stored", 100000, "failure reports stored before the summary is measured")
	flag.IntVar(&cfg.requests, "requests", 200, "summary requests measured")
	flag.IntVar(&cfg.workers, "workers", 256, "concurrent Ingest calls (as an import or SMTP connections would make)")
	flag.IntVar(&cfg.domains, "domains", 10, "registered domains the reports are spread over")
	flag.StringVar(&cfg.geoDir, "geo", "testdata/geo", "directory of the MaxMind test databases")
	jsonOut := flag.String("json", "", "also write the results as JSON lines to this file")
	flag.Parse()
	results, err := run(cfg)
	printTable(os.Stdout, results)
	if err == nil && *jsonOut != "" {
		err = jsonl.Write(*jsonOut, results)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "failurebench:", err)
		os.Exit(1)
	}
}

func run(cfg config) ([]result, error) {
	dir, err := os.MkdirTemp("", "failurebench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := newBench(dir, cfg)
	if err != nil {
		return nil, err
	}
	defer b.close()
	now := time.Now().UTC()
	mbox := filepath.Join(dir, "failures.mbox")
	if err := writeMbox(mbox, cfg.mails, 0, b.domainNames(), now); err != nil {
		return nil, err
	}
	var results []result
	intake, err := b.intake(mbox)
	if err != nil {
		return results, err
	}
	results = append(results, intake...)
	fill, err := b.fill(cfg.stored-cfg.mails, now)
	if err != nil {
		return results, err
	}
	results = append(results, fill)
	summary, err := b.summary()
	return append(results, summary...), err
}

// bench is a fresh database with one organization and its domains, the
// geo test databases and a running pipeline.
type bench struct {
	cfg     config
	db      *store.DB
	org     *store.Organization
	domains []*store.Domain
	geo     *geo.DB
	p       *ingest.Pipeline
	cancel  context.CancelFunc
	done    chan error
}

func newBench(dir string, cfg config) (*bench, error) {
	b := &bench{cfg: cfg, done: make(chan error, 1)}
	var err error
	if b.db, err = store.Open(filepath.Join(dir, "dmarcd.db"), nil); err != nil {
		return nil, err
	}
	if b.org, err = b.db.CreateOrganization("bench", store.PlanUnlimited); err != nil {
		return nil, err
	}
	for i := range cfg.domains {
		d := &store.Domain{OrgID: b.org.ID, Name: fmt.Sprintf("domain%d.example", i),
			ReportingEmail: fmt.Sprintf("r%d@reports.test", i), DMARCRecord: "v=DMARC1; p=none"}
		if err := b.db.CreateDomain(d); err != nil {
			return nil, err
		}
		b.domains = append(b.domains, d)
	}
	if b.geo, err = geo.Open(geo.Config{
		CityPath: filepath.Join(cfg.geoDir, "GeoIP2-City-Test.mmdb"),
		ASNPath:  filepath.Join(cfg.geoDir, "GeoLite2-ASN-Test.mmdb"),
	}); err != nil {
		return nil, err
	}
	if b.p, err = ingest.New(ingest.Config{Store: b.db, Geo: b.geo}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { b.done <- b.p.Run(ctx) }()
	return b, nil
}

func (b *bench) close() {
	b.cancel()
	<-b.done
	_ = b.db.Close()
	_ = b.geo.Close()
}

func (b *bench) domainNames() []string {
	var names []string
	for _, d := range b.domains {
		names = append(names, d.Name)
	}
	return names
}

// writeMbox writes n report mails, numbered from first, to path.
func writeMbox(path string, n, first int, domains []string, now time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := first; i < first+n; i++ {
		fmt.Fprintf(w, "From dmarc@reporter%d.example %s\n", i%7, now.Format(time.ANSIC))
		w.Write(reportMail(i, domains, now))
		w.WriteString("\n")
	}
	return errors.Join(w.Flush(), f.Close())
}

// geoIPs are addresses the MaxMind test databases know, so that some
// reports are geolocated; the rest come from a pool of 5,000 addresses,
// enough to fill the per-day source cap of the roll-ups.
var geoIPs = []string{"81.2.69.142", "89.160.20.112", "216.160.83.56", "2001:480:10::1"}

func sourceIP(i int) string {
	if i%10 == 0 {
		return geoIPs[i/10%len(geoIPs)]
	}
	return fmt.Sprintf("198.18.%d.%d", i%5000/250, i%250+1)
}

// arrivalOf spreads arrival dates over the summary's window: today up to
// now and the 6 UTC days before.
func arrivalOf(i int, now time.Time) time.Time {
	start := now.Truncate(24*time.Hour).AddDate(0, 0, -(store.FailureSummaryDays - 1))
	span := int(now.Sub(start)/time.Minute) + 1
	return now.Add(-time.Duration(i%span) * time.Minute)
}

// reportMail is report mail i: one RFC 6591 report with the original's
// headers, about one of domains, arrived within the summary's window.
func reportMail(i int, domains []string, now time.Time) []byte {
	dom := domains[i%len(domains)]
	arrival := arrivalOf(i, now)
	checks := []string{"dmarc", "spf", "dkim", "dmarc, spf"}[i%4]
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: DMARC reports <dmarc@reporter%d.example>\nTo: r@reports.test\nSubject: DMARC failure report for %s\n", i%7, dom)
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/report; report-type=feedback-report; boundary=\"rr\"\n\n")
	b.WriteString("--rr\nContent-Type: text/plain\n\nThis is an authentication failure report.\n")
	fmt.Fprintf(&b, "--rr\nContent-Type: message/feedback-report\n\nFeedback-Type: auth-failure\nUser-Agent: bench/1.0\nVersion: 1\n"+
		"Original-Mail-From: <bounce%d@sender.test>\nOriginal-Rcpt-To: <user%d@%s>\nArrival-Date: %s\n"+
		"Reporting-MTA: dns; mx.reporter%d.example\nSource-IP: %s\nReported-Domain: %s\nAuth-Failure: %s\nDelivery-Result: reject\n",
		i, i, dom, arrival.Format(time.RFC1123Z), i%7, sourceIP(i), dom, checks)
	fmt.Fprintf(&b, "--rr\nContent-Type: text/rfc822-headers\n\nAuthentication-Results: mx.reporter.example; dkim=fail header.d=%s; spf=fail smtp.mailfrom=sender.test; dmarc=fail header.from=%s\n"+
		"From: <ceo@%s>\nTo: <user%d@%s>\nSubject: Invoice %d\nMessage-ID: <%d.bench@sender.test>\nDate: %s\n\n--rr--\n",
		dom, dom, dom, i, dom, i, i, arrival.Format(time.RFC1123Z))
	return b.Bytes()
}

// intake imports the mbox through the pipeline, and parses its mails
// alone as the baseline.
func (b *bench) intake(mbox string) ([]result, error) {
	mails, err := readMbox(mbox)
	if err != nil {
		return nil, err
	}
	parseRate, err := parseOnly(mails)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	sum, err := imports.Run(context.Background(), []string{mbox}, imports.Options{Ingest: b.p.Ingest, Jobs: b.cfg.workers})
	if err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	if sum.FailureReports != len(mails) || sum.Failed != 0 || sum.Quarantined != 0 {
		return nil, fmt.Errorf("import stored %d of %d (failed %d, quarantined %d): %+v", sum.FailureReports, len(mails), sum.Failed, sum.Quarantined, sum.Failures)
	}
	_, total, err := b.db.ListFailureReports(b.org.ID, store.FailureFilter{Page: store.Page{Page: 1, Limit: 1}})
	if err != nil || total != len(mails) {
		return nil, fmt.Errorf("the store lists %d failure reports, want %d (%v)", total, len(mails), err)
	}
	rate := float64(sum.FailureReports) / secs
	st := b.p.Stats()
	return []result{{
		Metric: "failure reports parsed+stored", Value: rate, Unit: "reports/s",
		Baseline: parseRate, BaseName: "parse only", Target: ">= 2000", Pass: check(rate >= 2000),
		Note: fmt.Sprintf("%d mails in %.2fs through the pipeline, %d workers, %d commits (%.0f ms in commits), GOMAXPROCS %d",
			sum.FailureReports, secs, b.cfg.workers, st.Commits, st.CommitTime.Seconds()*1000, runtime.GOMAXPROCS(0)),
	}}, nil
}

func readMbox(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mails [][]byte
	r := imports.NewMboxReader(f)
	for {
		m, err := r.Next()
		if err == io.EOF {
			return mails, nil
		}
		if err != nil {
			return nil, err
		}
		mails = append(mails, m)
	}
}

// parseOnly parses every mail on every core and returns reports per second.
func parseOnly(mails [][]byte) (float64, error) {
	var next, reports atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, runtime.GOMAXPROCS(0))
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(mails) {
					return
				}
				reps, err := arf.Extract(bytes.NewReader(mails[i]), container.Limits{})
				if err != nil {
					errs <- err
					return
				}
				reports.Add(int64(len(reps)))
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(reports.Load()) / time.Since(start).Seconds(), nil
}

// fill stores n more reports straight through the store's writer, in
// commits of 1,000, to reach the size the summary is measured at.
func (b *bench) fill(n int, now time.Time) (result, error) {
	ing := b.db.NewIngester()
	start := time.Now()
	for done := 0; done < n; {
		batch := min(1000, n-done)
		drafts := make([]*store.FailureDraft, 0, batch)
		for k := range batch {
			i := b.cfg.mails + done + k
			d := b.domains[i%len(b.domains)]
			ip := sourceIP(i)
			f, err := store.NewFailureDraft(&store.FailureReportDetail{FailureReport: &store.FailureReport{
				DomainID: d.ID, Domain: d.Name, OrgID: d.OrgID, ReceivedAt: now,
				ArrivalDate: arrivalOf(i, now), Reporter: ptr(fmt.Sprintf("mx.reporter%d.example", i%7)),
				SourceIP: &ip, MessageID: ptr(fmt.Sprintf("%d.bench@sender.test", i)), AuthFailure: []string{"dmarc"},
			}})
			if err != nil {
				return result{}, err
			}
			drafts = append(drafts, f)
		}
		if _, err := ing.Commit(&store.IngestBatch{Failures: drafts}); err != nil {
			return result{}, err
		}
		done += batch
	}
	return result{Metric: "filled to " + fmt.Sprint(b.cfg.stored), Value: float64(n) / time.Since(start).Seconds(), Unit: "reports/s",
		Note: "reports added through store.Ingester in commits of 1,000 (set-up, not a target)"}, nil
}

// summary measures the summary endpoint over HTTP beside /healthz.
func (b *bench) summary() ([]result, error) {
	_, key, err := b.db.CreateAPIKey(b.org.ID, "bench", store.ScopeRead)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: b.db, RateLimit: 1 << 30}))
	defer srv.Close()
	var sum store.FailureSummary
	if err := getJSON(srv.URL+"/api/v1/forensic-reports/summary", key, &sum); err != nil {
		return nil, err
	}
	if sum.Total != int64(b.cfg.stored) {
		return nil, fmt.Errorf("the summary counts %d reports, want %d", sum.Total, b.cfg.stored)
	}
	health, _, err := timeGets(srv.URL+"/healthz", "", b.cfg.requests)
	if err != nil {
		return nil, err
	}
	lat, bytes, err := timeGets(srv.URL+"/api/v1/forensic-reports/summary", key, b.cfg.requests)
	if err != nil {
		return nil, err
	}
	stats, _, err := timeGets(srv.URL+"/api/v1/forensic-reports/statistics", key, 20)
	if err != nil {
		return nil, err
	}
	list, _, err := timeGets(srv.URL+"/api/v1/forensic-reports?auth_failure=spf", key, 20)
	if err != nil {
		return nil, err
	}
	p50, p99, worst := pct(lat, 50), pct(lat, 99), lat[len(lat)-1]
	return []result{
		{Metric: "summary p50", Value: ms(p50), Unit: "ms", Baseline: ms(pct(health, 50)), BaseName: "/healthz p50"},
		{Metric: "summary p99", Value: ms(p99), Unit: "ms", Baseline: ms(pct(health, 99)), BaseName: "/healthz p99"},
		{Metric: "summary max", Value: ms(worst), Unit: "ms", Target: "< 50", Pass: check(worst < 50*time.Millisecond),
			Note: fmt.Sprintf("%d requests, %d stored failure reports over 7 days and %d domains, %d-byte answer",
				len(lat), b.cfg.stored, len(b.domains), bytes)},
		{Metric: "statistics (all time) p50", Value: ms(pct(stats, 50)), Unit: "ms", Note: "for information"},
		{Metric: "list auth_failure=spf p50", Value: ms(pct(list, 50)), Unit: "ms", Note: "for information: counts the matches over the whole index"},
	}, nil
}

func getJSON(url, key string, v any) error {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		return fmt.Errorf("GET %s: %d %s", url, res.StatusCode, body)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// timeGets makes n sequential GETs and returns their sorted latencies and
// the size of the last answer.
func timeGets(url, key string, n int) ([]time.Duration, int, error) {
	lat := make([]time.Duration, 0, n)
	size := 0
	for range n {
		req, _ := http.NewRequest("GET", url, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, 0, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		lat = append(lat, time.Since(start))
		if err != nil || res.StatusCode != http.StatusOK {
			return nil, 0, fmt.Errorf("GET %s: %d %v", url, res.StatusCode, err)
		}
		size = len(body)
	}
	slices.Sort(lat)
	return lat, size, nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ptr(s string) *string { return &s }

func check(ok bool) *bool { return &ok }

func printTable(w io.Writer, results []result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tvalue\tunit\tbaseline\t\ttarget\tok\t")
	for _, r := range results {
		base := ""
		if r.Baseline > 0 {
			base = fmt.Sprintf("%.2f", r.Baseline)
		}
		ok := ""
		if r.Pass != nil {
			ok = map[bool]string{true: "yes", false: "NO"}[*r.Pass]
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n", r.Metric, r.Value, r.Unit, base, r.BaseName, r.Target, ok)
	}
	_ = tw.Flush()
	for _, r := range results {
		if r.Note != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Metric, r.Note)
		}
	}
}
