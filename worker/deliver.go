package worker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
)

// Delivery defaults.
const (
	// DefaultDeliverEvery is how often the scheduler runs the delivery job.
	DefaultDeliverEvery = time.Second
	// DefaultDeliverConcurrency bounds the attempts in flight at once.
	DefaultDeliverConcurrency = 16
	// DefaultPerWebhook bounds the attempts in flight to one webhook, so
	// that a slow receiver holds at most this many of the slots.
	DefaultPerWebhook = 4
)

// DefaultRetryDelays returns SPEC.md's delays: the second attempt 30 s
// after the first failed, the third 120 s after the second.
func DefaultRetryDelays() []time.Duration {
	return []time.Duration{30 * time.Second, 120 * time.Second}
}

// DeliverConfig is what a Deliverer is built from.
type DeliverConfig struct {
	Store  *store.DB
	Client *webhook.Client
	// RetryDelays are the waits after each failed attempt; an attempt
	// after the last delay is not retried. nil means DefaultRetryDelays;
	// an empty, non-nil slice means no retries.
	RetryDelays []time.Duration
	// Concurrency bounds the attempts in flight; 0 means
	// DefaultDeliverConcurrency.
	Concurrency int
	// PerWebhook bounds the attempts in flight to one webhook; 0 means
	// DefaultPerWebhook (at most Concurrency).
	PerWebhook int
	// Poll is how often a run looks for newly due deliveries while
	// attempts are in flight; 0 means DefaultDeliverEvery.
	Poll    time.Duration
	Logger  *slog.Logger      // nil discards
	Metrics *metrics.Registry // nil keeps the metrics private
	// Now is the clock deliveries are signed and scheduled with; nil means
	// time.Now.
	Now func() time.Time
	// PublicURL is the URL people reach dmarcd by (--public-url): chat
	// messages link to the alert under it. "" means no link.
	PublicURL string
}

// Deliverer is the webhook delivery job: it sends the outbox's due
// deliveries, each body built by package webhook from the entry and
// signed afresh on each attempt, and records the results (retries,
// auto-disable, alerts sent) in the store.
type Deliverer struct {
	db          *store.DB
	client      *webhook.Client
	delays      []time.Duration
	concurrency int
	perWebhook  int
	poll        time.Duration
	log         *slog.Logger
	now         func() time.Time
	publicURL   string
	outcomes    *metrics.CounterVec
	depth       atomic.Int64
}

// NewDeliverer returns the delivery job of cfg and registers its metrics:
// dmarcd_webhook_deliveries_total{outcome} and dmarcd_webhook_outbox_depth.
// It returns an error when Store or Client is missing or a setting is
// negative.
func NewDeliverer(cfg DeliverConfig) (*Deliverer, error) {
	if cfg.Store == nil || cfg.Client == nil {
		return nil, errors.New("worker: a deliverer needs a store and a webhook client")
	}
	if cfg.Concurrency < 0 || cfg.PerWebhook < 0 || cfg.Poll < 0 {
		return nil, errors.New("worker: delivery concurrency and poll interval must not be negative")
	}
	for _, d := range cfg.RetryDelays {
		if d <= 0 {
			return nil, errors.New("worker: webhook retry delays must be positive")
		}
	}
	d := &Deliverer{
		db: cfg.Store, client: cfg.Client, delays: cfg.RetryDelays, concurrency: cfg.Concurrency,
		perWebhook: cfg.PerWebhook, poll: cfg.Poll, log: cfg.Logger, now: cfg.Now, publicURL: cfg.PublicURL,
	}
	if d.delays == nil {
		d.delays = DefaultRetryDelays()
	}
	if d.concurrency == 0 {
		d.concurrency = DefaultDeliverConcurrency
	}
	if d.perWebhook == 0 {
		d.perWebhook = DefaultPerWebhook
	}
	d.perWebhook = min(d.perWebhook, d.concurrency)
	if d.poll == 0 {
		d.poll = DefaultDeliverEvery
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	reg := cfg.Metrics
	if reg == nil {
		reg = metrics.NewRegistry()
	}
	d.outcomes = reg.Counter("dmarcd_webhook_deliveries_total",
		"Webhook delivery attempts by outcome: success; failure (a retry is due); given_up (the last attempt failed); "+
			"disabled (the failure disabled the webhook).", "outcome")
	reg.GaugeFunc("dmarcd_webhook_outbox_depth", "Webhook deliveries waiting in the outbox.", d.outboxDepth)
	return d, nil
}

// outboxDepth reads the depth for the gauge; a failed read (the database
// closing) shows the last value read.
func (d *Deliverer) outboxDepth() float64 {
	if n, err := d.db.OutboxDepth(); err == nil {
		d.depth.Store(int64(n))
	}
	return float64(d.depth.Load())
}

// attempt is the end of one delivery attempt.
type attempt struct {
	delivery *store.OutboxEntry
	res      webhook.Result
	at       time.Time
	// cancelled: the run was stopped before an answer came. The attempt is
	// not recorded; the delivery stays due and is made again later.
	cancelled bool
	// drop: not attempted (the webhook is gone or inactive, or the entry
	// cannot make a body); the entry is removed.
	drop bool
}

// run is the state of one DeliverDue call: what is in flight.
type run struct {
	inFlight map[string]bool // outbox entry ids
	perHook  map[string]int  // webhook id -> attempts in flight
	n        int
	done     chan attempt
	// bodies are the bodies built for the event last seen, by format: the
	// entries of one event (one per webhook) fall due together and share
	// them.
	event  string
	bodies map[string][]byte
}

// DeliverDue is the scheduler job. It sends every due delivery, at most
// Concurrency at once and PerWebhook to one webhook, each in its own
// goroutine so that a slow receiver holds up nobody else, and records the
// results as they come in, several per transaction. While attempts are in
// flight it keeps looking for deliveries falling due (retries included);
// it returns once nothing is in flight and nothing is due. When ctx ends,
// attempts in flight are cancelled and stay due in the database, except
// those that already succeeded. The error is a failure to read or write
// the store.
func (d *Deliverer) DeliverDue(ctx context.Context, _ time.Time) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{inFlight: map[string]bool{}, perHook: map[string]int{}, done: make(chan attempt, d.concurrency)}
	var finished []attempt
	var firstErr error
	tick := time.NewTicker(d.poll)
	defer tick.Stop()
	for {
		if len(finished) > 0 {
			if err := d.record(r, finished); err != nil && firstErr == nil {
				firstErr = err
				cancel() // stop sending; what is in flight is left due
			}
			finished = finished[:0]
		}
		if ctx.Err() == nil {
			orphans, err := d.dispatch(ctx, r)
			if err != nil && firstErr == nil {
				firstErr = err
				cancel()
			}
			finished = append(finished, orphans...)
			if len(orphans) > 0 {
				continue
			}
		}
		if r.n == 0 {
			return firstErr
		}
		select {
		case a := <-r.done:
			finished = append(finished, d.collect(r, a)...)
		case <-tick.C:
		}
	}
}

// collect takes a finished attempt and any others already waiting.
func (d *Deliverer) collect(r *run, a attempt) []attempt {
	out := []attempt{a}
	r.n--
	for {
		select {
		case a := <-r.done:
			out = append(out, a)
			r.n--
		default:
			return out
		}
	}
}

// dispatch starts attempts for due deliveries while slots are free. It
// returns, as finished, the deliveries to drop without an attempt: their
// webhook is gone or inactive, or their entry makes no body.
func (d *Deliverer) dispatch(ctx context.Context, r *run) ([]attempt, error) {
	free := d.concurrency - r.n
	if free <= 0 {
		return nil, nil
	}
	taken := map[string]int{}
	due, err := d.db.DueDeliveries(d.now(), free, func(dl *store.OutboxEntry) bool {
		if r.inFlight[dl.ID] || r.perHook[dl.WebhookID]+taken[dl.WebhookID] >= d.perWebhook {
			return true
		}
		taken[dl.WebhookID]++
		return false
	})
	if err != nil {
		return nil, err
	}
	var orphans []attempt
	for _, dl := range due {
		r.inFlight[dl.ID] = true
		if dl.URL == "" {
			orphans = append(orphans, attempt{delivery: dl, drop: true})
			continue
		}
		body, err := r.bodyOf(dl, d.publicURL)
		if err != nil {
			d.log.Error("webhook delivery dropped: its outbox entry makes no event body",
				"webhook_id", dl.WebhookID, "event_id", dl.EventID, "alert_id", dl.AlertID, "error", err)
			orphans = append(orphans, attempt{delivery: dl, drop: true})
			continue
		}
		r.perHook[dl.WebhookID]++
		r.n++
		go func() {
			res := d.client.DeliverBody(ctx, dl.URL, string(dl.Secret), dl.EventID, body, d.now())
			r.done <- attempt{delivery: dl, res: res, at: d.now(), cancelled: !res.Success && ctx.Err() != nil}
		}()
	}
	return orphans, nil
}

// bodyOf returns the body of an outbox entry's delivery, built by package
// webhook from the entry in its webhook's format: the same bytes on every
// attempt while the format stays. Attempts only read it, so the entries
// of one event share one per format.
func (r *run) bodyOf(dl *store.OutboxEntry, publicURL string) ([]byte, error) {
	if dl.EventID != r.event || r.bodies == nil {
		r.event, r.bodies = dl.EventID, map[string][]byte{}
	}
	// The domain is part of a chat body; an event has one alert, so one
	// domain, whichever webhook it goes to.
	if body, ok := r.bodies[dl.Format]; ok {
		return body, nil
	}
	ev, err := webhook.NewAlertEvent(dl.EventID, dl.OrgID, dl.Alert, dl.CreatedAt, false)
	if err != nil {
		return nil, err
	}
	body, err := webhook.Body(dl.Format, ev, webhook.ChatContext{Domain: dl.Domain, PublicURL: publicURL})
	if err != nil {
		return nil, err
	}
	r.bodies[dl.Format] = body
	return body, nil
}

// record writes the results of finished attempts in one transaction, then
// logs and counts them. Cancelled attempts are left as they are.
func (d *Deliverer) record(r *run, finished []attempt) error {
	results := make([]store.DeliveryResult, 0, len(finished))
	var kept []attempt
	for _, a := range finished {
		if !a.drop {
			r.perHook[a.delivery.WebhookID]--
		}
		if a.cancelled {
			delete(r.inFlight, a.delivery.ID)
			continue
		}
		kept = append(kept, a)
		results = append(results, store.DeliveryResult{
			Entry: a.delivery, Success: a.res.Success, StatusCode: a.res.StatusCode,
			At: a.at, Drop: a.drop,
		})
	}
	if len(results) == 0 {
		return nil
	}
	outs, err := d.db.FinishDeliveries(results, d.delays)
	// Whether recorded or not, these are no longer in flight: a failed
	// write leaves them due, to be sent again.
	for _, a := range kept {
		delete(r.inFlight, a.delivery.ID)
	}
	if err != nil {
		return err
	}
	for i, a := range kept {
		d.report(a, outs[i])
	}
	return nil
}

// report logs one recorded attempt and counts it. The URL is not logged
// (it may carry a token) and neither is the secret or the body.
func (d *Deliverer) report(a attempt, o store.DeliveryOutcome) {
	dl := a.delivery
	attrs := []slog.Attr{
		slog.String("webhook_id", dl.WebhookID), slog.String("event_id", dl.EventID),
		slog.String("alert_id", dl.AlertID), slog.Int("attempt", dl.Attempt),
	}
	if a.res.StatusCode != nil {
		attrs = append(attrs, slog.Int("status_code", *a.res.StatusCode))
	}
	if a.res.Error != nil {
		attrs = append(attrs, slog.String("error", *a.res.Error))
	}
	attrs = append(attrs, slog.Int64("response_time_ms", a.res.ResponseTimeMS))
	ctx := context.Background()
	switch o.Outcome {
	case store.DeliverySucceeded:
		d.log.LogAttrs(ctx, slog.LevelDebug, "webhook delivered", append(attrs, slog.Bool("alert_sent", o.AlertSent))...)
	case store.DeliveryRetrying:
		d.log.LogAttrs(ctx, slog.LevelWarn, "webhook delivery failed, will retry",
			append(attrs, slog.Time("next_attempt_at", o.NextDue), slog.Int("consecutive_failures", o.ConsecutiveFailures))...)
	case store.DeliveryGivenUp:
		d.log.LogAttrs(ctx, slog.LevelWarn, "webhook delivery given up after its last attempt",
			append(attrs, slog.Int("consecutive_failures", o.ConsecutiveFailures))...)
	case store.DeliveryDisabled:
		d.log.LogAttrs(ctx, slog.LevelError, "webhook disabled after "+strconv.Itoa(store.MaxWebhookFailures)+
			" consecutive failed deliveries; its pending deliveries are dropped; set is_active to true to re-enable it",
			append(attrs, slog.Int("consecutive_failures", o.ConsecutiveFailures))...)
	case store.DeliveryDropped:
		d.log.LogAttrs(ctx, slog.LevelDebug, "webhook delivery dropped: the webhook was deleted or deactivated", attrs...)
		return
	}
	d.outcomes.With(o.Outcome).Inc()
}
