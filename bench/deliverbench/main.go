// Command deliverbench measures webhook delivery throughput through the
// real outbox and delivery job: alerts raised by stored failing reports
// queue their deliveries in a fsync'd bbolt file, and the job
// (worker.Deliverer, bounded concurrency) signs each attempt afresh and
// POSTs it over TLS to a local HTTPS receiver that checks every HMAC. The
// baseline is the same number of signed POSTs made straight with the
// webhook client at the same concurrency, with no outbox.
//
//	deliverbench                           # 200 alerts x 25 webhooks = 5000 deliveries
//	deliverbench -alerts 400 -c 32 -out r.json
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
	"github.com/dmarcd/dmarcd/worker"
)

// target is the figure: signed deliveries per second.
const target = 500

func main() {
	var (
		alerts     = flag.Int("alerts", 200, "alerts raised (one domain each)")
		hooks      = flag.Int("webhooks", 25, "webhooks of the organization (the unlimited plan allows 25): each alert goes to each")
		conc       = flag.Int("c", worker.DefaultDeliverConcurrency, "deliveries in flight at once (--webhook-concurrency)")
		perWebhook = flag.Int("per-webhook", worker.DefaultPerWebhook, "deliveries in flight to one webhook")
		rounds     = flag.Int("rounds", 2, "measured rounds; the best is reported (the machine may be shared)")
		out        = flag.String("out", "", "write the JSON record here too")
	)
	flag.Parse()
	if err := run(*alerts, *hooks, *conc, *perWebhook, max(*rounds, 1), *out); err != nil {
		fmt.Fprintln(os.Stderr, "deliverbench:", err)
		os.Exit(1)
	}
}

type record struct {
	Date           string  `json:"date"`
	Deliveries     int     `json:"deliveries"`
	Webhooks       int     `json:"webhooks"`
	Concurrency    int     `json:"concurrency"`
	PerWebhook     int     `json:"per_webhook"`
	CPUs           int     `json:"cpus"`
	Seconds        float64 `json:"seconds"`
	PerSecond      float64 `json:"deliveries_per_second"`
	BaselineSecond float64 `json:"baseline_deliveries_per_second"`
	Verified       int64   `json:"verified_by_receiver"`
	Rejected       int64   `json:"rejected_by_receiver"`
	AlertsSent     int     `json:"alerts_sent"`
	Target         string  `json:"target"`
	TargetMet      bool    `json:"target_met"`
}

func run(alerts, hooks, conc, perWebhook, rounds int, out string) error {
	rc := newReceiver()
	defer rc.srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(rc.srv.Certificate())
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{"127.0.0.1:53"}})
	if err != nil {
		return err
	}
	client := webhook.NewClient(res, egress.Policy{AllowPrivate: true, RootCAs: pool})
	defer client.CloseIdleConnections()

	rec := record{Date: time.Now().UTC().Format(time.RFC3339), Webhooks: hooks, Concurrency: conc,
		PerWebhook: perWebhook, CPUs: runtime.GOMAXPROCS(0), Target: fmt.Sprintf(">= %d deliveries/s", target)}
	for i := range rounds {
		r, err := outboxRound(rc, client, alerts, hooks, conc, perWebhook)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: outbox + job  %d deliveries in %.2fs = %.0f/s (receiver verified %d, rejected %d; %d alerts sent)\n",
			i+1, r.Deliveries, r.Seconds, r.PerSecond, r.Verified, r.Rejected, r.AlertsSent)
		if r.Rejected != 0 || r.Verified != int64(r.Deliveries) || r.AlertsSent != alerts {
			return fmt.Errorf("round %d: %d deliveries verified, %d rejected, %d of %d alerts sent", i+1, r.Verified, r.Rejected, r.AlertsSent, alerts)
		}
		if r.PerSecond > rec.PerSecond {
			rec.Deliveries, rec.Seconds, rec.PerSecond, rec.Verified, rec.AlertsSent = r.Deliveries, r.Seconds, r.PerSecond, r.Verified, r.AlertsSent
		}
		base, err := baselineRound(rc, client, alerts*hooks, hooks, conc)
		if err != nil {
			return err
		}
		fmt.Printf("round %d: baseline      %d signed POSTs straight from the client = %.0f/s\n", i+1, alerts*hooks, base)
		rec.BaselineSecond = max(rec.BaselineSecond, base)
	}
	rec.TargetMet = rec.PerSecond >= target
	fmt.Printf("best: %.0f deliveries/s through the outbox (target %s: met=%v); baseline %.0f/s\n",
		rec.PerSecond, rec.Target, rec.TargetMet, rec.BaselineSecond)
	if out != "" {
		b, _ := json.MarshalIndent(rec, "", "  ")
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if !rec.TargetMet {
		return fmt.Errorf("%.0f deliveries/s is under the target of %d", rec.PerSecond, target)
	}
	return nil
}

// outboxRound sets up a fresh database, raises the alerts, and times the
// delivery job until the outbox is empty.
func outboxRound(rc *receiver, client *webhook.Client, alerts, hooks, conc, perWebhook int) (record, error) {
	dir, err := os.MkdirTemp("", "dmarcd-deliverbench-")
	if err != nil {
		return record{}, err
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "dmarcd.db"), nil)
	if err != nil {
		return record{}, err
	}
	defer db.Close()
	org, err := db.CreateOrganization("bench", store.PlanUnlimited)
	if err != nil {
		return record{}, err
	}
	rc.reset()
	for i := range hooks {
		secret := webhook.NewSecret()
		w := &store.Webhook{OrgID: org.ID, URL: rc.srv.URL + "/hook/" + strconv.Itoa(i), Name: "hook " + strconv.Itoa(i)}
		if err := db.CreateWebhook(w, store.WebhookSecret(secret)); err != nil {
			return record{}, err
		}
		rc.secrets.Store("/hook/"+strconv.Itoa(i), secret)
	}
	if err := raiseAlerts(db, org.ID, alerts); err != nil {
		return record{}, err
	}
	depth, err := db.OutboxDepth()
	if err != nil || depth != alerts*hooks {
		return record{}, fmt.Errorf("outbox holds %d deliveries (%v), want %d", depth, err, alerts*hooks)
	}
	d, err := worker.NewDeliverer(worker.DeliverConfig{Store: db, Client: client, Concurrency: conc, PerWebhook: perWebhook})
	if err != nil {
		return record{}, err
	}
	start := time.Now()
	for depth > 0 {
		if err := d.DeliverDue(context.Background(), time.Now()); err != nil {
			return record{}, err
		}
		if depth, err = db.OutboxDepth(); err != nil {
			return record{}, err
		}
	}
	secs := time.Since(start).Seconds()
	_, total, err := db.ListAlerts(org.ID, store.AlertFilter{Status: store.AlertSent, Page: store.Page{Page: 1, Limit: 1}})
	if err != nil {
		return record{}, err
	}
	n := alerts * hooks
	return record{Deliveries: n, Seconds: secs, PerSecond: float64(n) / secs,
		Verified: rc.verified.Load(), Rejected: rc.rejected.Load(), AlertsSent: total}, nil
}

// raiseAlerts stores, in one commit, a report for each of n new domains
// whose mail all fails DMARC: the alert rules raise one alert per domain,
// each queueing a delivery per webhook.
func raiseAlerts(db *store.DB, orgID string, n int) error {
	now := time.Now().UTC()
	var drafts []*store.ReportDraft
	for i := range n {
		name := fmt.Sprintf("d%d.bench.example", i)
		addr := store.NewReportingLocal() + "@reports.bench.example"
		dom := &store.Domain{OrgID: orgID, Name: name, ReportingEmail: addr, DMARCRecord: "v=DMARC1; p=none; rua=mailto:" + addr}
		if err := db.CreateDomain(dom); err != nil {
			return err
		}
		d, err := db.NewReportDraft(store.Report{DomainID: dom.ID, Domain: name, OrgID: orgID, OrgName: "reporter.example",
			ExternalReportID: store.NewID(), ReceivedAt: now, DateBegin: now.Add(-24 * time.Hour), DateEnd: now})
		if err != nil {
			return err
		}
		d.Add(&store.Record{SourceIP: "203.0.113.9", Count: 100, Disposition: "none", DKIM: "fail", SPF: "fail", HeaderFrom: name})
		d.Finish()
		drafts = append(drafts, d)
	}
	_, err := db.NewIngester().Commit(&store.IngestBatch{Reports: drafts})
	return err
}

// baselineRound makes n signed POSTs straight with the client, conc at a
// time, and returns how many per second.
func baselineRound(rc *receiver, client *webhook.Client, n, hooks, conc int) (float64, error) {
	rc.reset()
	for i := range hooks {
		rc.secrets.Store("/base/"+strconv.Itoa(i), "whsec_baseline")
	}
	ev, err := webhook.NewAlertEvent(store.NewEventID(), store.NewID(), map[string]any{"id": store.NewID(), "type": "dmarc_failure_rate"}, time.Now(), false)
	if err != nil {
		return 0, err
	}
	body, err := webhook.Encode(ev)
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				url := rc.srv.URL + "/base/" + strconv.Itoa(int(i)%hooks)
				if res := client.DeliverBody(context.Background(), url, "whsec_baseline", ev.ID, body, time.Now()); !res.Success {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if failed.Load() != 0 || rc.verified.Load() != int64(n) {
		return 0, fmt.Errorf("baseline: %d failed, %d verified of %d", failed.Load(), rc.verified.Load(), n)
	}
	return float64(n) / secs, nil
}

// receiver is the local HTTPS endpoint: it checks the timestamp and the
// HMAC of every request against the secret of its path.
type receiver struct {
	srv      *httptest.Server
	secrets  sync.Map // path -> secret
	verified atomic.Int64
	rejected atomic.Int64
}

func newReceiver() *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewUnstartedServer(rc)
	rc.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	rc.srv.StartTLS()
	return rc
}

func (rc *receiver) reset() {
	rc.secrets.Clear()
	rc.verified.Store(0)
	rc.rejected.Store(0)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	secret, ok := rc.secrets.Load(r.URL.Path)
	ts := r.Header.Get(webhook.HeaderTimestamp)
	n, tsErr := strconv.ParseInt(ts, 10, 64)
	sig, _ := hex.DecodeString(strings.TrimPrefix(r.Header.Get(webhook.HeaderSignature), "sha256="))
	if err != nil || !ok || tsErr != nil || max(n-time.Now().Unix(), time.Now().Unix()-n) > 300 {
		rc.rejected.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	mac := hmac.New(sha256.New, []byte(secret.(string)))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	if !hmac.Equal(sig, mac.Sum(nil)) {
		rc.rejected.Add(1)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	rc.verified.Add(1)
	w.WriteHeader(http.StatusNoContent)
}
