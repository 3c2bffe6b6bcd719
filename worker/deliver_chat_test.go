package worker_test

import (
	"crypto/x509"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/internal/chattest"
	"github.com/dmarcd/dmarcd/internal/dnstest"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
	"github.com/dmarcd/dmarcd/worker"
)

const publicURL = "https://dmarc.example.net"

// chatEnv is newEnv whose webhook client trusts the chat receivers rcs
// and the dmarcd receivers drs.
func chatEnv(t *testing.T, rcs []*chattest.Receiver, drs ...*receiver) *env {
	t.Helper()
	e := newEnv(t)
	p := x509.NewCertPool()
	for _, rc := range rcs {
		p.AddCert(rc.Server.Certificate())
	}
	for _, rc := range drs {
		p.AddCert(rc.srv.Certificate())
	}
	ns := dnstest.Start(t)
	res, err := dnscheck.NewResolver(dnscheck.Config{Servers: []string{ns.Addr}, Timeout: 300 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.client = webhook.NewClient(res, egress.Policy{AllowPrivate: true, RootCAs: p})
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

func (e *env) chatHook(t *testing.T, rc *chattest.Receiver, format string) *store.Webhook {
	t.Helper()
	w := &store.Webhook{OrgID: e.org.ID, URL: rc.URL("/" + format), Name: format, Format: format}
	if err := e.db.CreateWebhook(w, store.WebhookSecret(webhook.NewSecret())); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDeliverChatFormats sends one alert to a Slack, a Teams and a
// dmarcd webhook, each on a real HTTPS receiver on loopback: the chat
// receivers get messages of the documented shapes that name the domain
// and link to the alert under --public-url, with the delivery headers;
// the dmarcd receiver gets the signed event, unchanged by the others.
func TestDeliverChatFormats(t *testing.T) {
	slack, teams, plain := chattest.NewReceiver(t), chattest.NewReceiver(t), newReceiver(t)
	e := chatEnv(t, []*chattest.Receiver{slack, teams}, plain)
	e.chatHook(t, slack, webhook.FormatSlack)
	e.chatHook(t, teams, webhook.FormatTeams)
	e.webhookTo(t, plain, "/plain")
	d := e.deliverer(t, worker.DeliverConfig{PublicURL: publicURL})
	al := e.raiseAlert(t)
	e.deliver(t, d)

	link := publicURL + "/alerts?domain=" + *al.DomainID + "#alert-" + al.ID
	for name, c := range map[string]struct {
		rc    *chattest.Receiver
		check func([]byte, string) error
	}{"slack": {slack, chattest.CheckSlack}, "teams": {teams, chattest.CheckTeams}} {
		got := c.rc.Requests()
		if len(got) != 1 {
			t.Fatalf("%s receiver got %d requests, want 1", name, len(got))
		}
		if err := c.check(got[0].Body, link); err != nil {
			t.Errorf("%s: %v\n%s", name, err, got[0].Body)
		}
		body := string(got[0].Body)
		for _, want := range []string{"d1.example.com", link, "Critical", al.Title} {
			if !strings.Contains(body, want) {
				t.Errorf("%s message lacks %q:\n%s", name, want, body)
			}
		}
		h := got[0].Header
		if h.Get("Content-Type") != "application/json" || !strings.HasPrefix(h.Get("X-Webhook-Signature"), "sha256=") ||
			!strings.HasPrefix(h.Get("X-Webhook-Id"), "evt_") {
			t.Errorf("%s headers: %v", name, h)
		}
	}
	if got := plain.deliveries(t); len(got) != 1 || got[0].event.Data.Alert["id"] != al.ID {
		t.Errorf("the dmarcd receiver got %d deliveries", len(got))
	}
	if got := e.alert(t, al.ID); got.Status != store.AlertSent {
		t.Errorf("alert %s after every webhook got it, want sent", got.Status)
	}
}

// TestChatRetriesAndAutoDisable ensures a chat webhook is retried with
// the same message and disabled after 10 failures, as a dmarcd one is.
func TestChatRetriesAndAutoDisable(t *testing.T) {
	rc := chattest.NewReceiver(t, http.StatusInternalServerError, http.StatusBadGateway, http.StatusOK, http.StatusInternalServerError)
	e := chatEnv(t, []*chattest.Receiver{rc})
	w := e.chatHook(t, rc, webhook.FormatTeams)
	d := e.deliverer(t, worker.DeliverConfig{RetryDelays: []time.Duration{time.Second, time.Second}, PerWebhook: 1, PublicURL: publicURL})
	al := e.raiseAlert(t)
	for range 3 {
		e.deliver(t, d)
		e.clock.Advance(time.Second)
	}
	got := rc.Requests()
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3 (two failures, then success)", len(got))
	}
	for i := range got {
		if string(got[i].Body) != string(got[0].Body) || got[i].Header.Get("X-Webhook-Id") != got[0].Header.Get("X-Webhook-Id") {
			t.Errorf("attempt %d sent another message", i+1)
		}
	}
	if a := e.alert(t, al.ID); a.Status != store.AlertSent {
		t.Errorf("alert %s after the third attempt succeeded", a.Status)
	}
	// Now every attempt fails: ten in a row disable the webhook.
	for range 4 {
		e.raiseAlert(t)
	}
	for range 4 {
		e.deliver(t, d)
		e.clock.Advance(time.Second)
	}
	if n := len(rc.Requests()) - 3; n != store.MaxWebhookFailures {
		t.Errorf("%d failing attempts before the webhook was disabled, want %d", n, store.MaxWebhookFailures)
	}
	if hw := e.webhook(t, w.ID); hw.IsActive || hw.DisabledReason == nil || hw.Format != webhook.FormatTeams {
		t.Errorf("webhook after 10 failures = %+v", hw)
	}
}
