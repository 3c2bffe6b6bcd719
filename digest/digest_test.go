package digest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/httpapi"
	"github.com/dmarcd/dmarcd/internal/numfmt"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func TestPeriodBounds(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		p        digest.Period
		at       time.Time
		from, to time.Time
	}{
		{digest.Day, now, day(28), day(28)},
		{digest.Day, day(29), day(28), day(28)},
		{digest.Week, now, day(16), day(22)},                      // Sunday
		{digest.Week, day(23), day(16), day(22)},                  // Monday 00:00
		{digest.Week, day(23).Add(-time.Second), day(9), day(15)}, // Sunday 23:59:59
	} {
		from, to := c.p.Bounds(c.at)
		if !from.Equal(c.from) || !to.Equal(c.to) {
			t.Errorf("%s at %s: %s..%s, want %s..%s", c.p, c.at, from, to, c.from, c.to)
		}
	}
	if _, err := digest.ParsePeriod("month"); err == nil {
		t.Error("ParsePeriod(month) took it")
	}
}

// statsOf is GET /api/v1/domains/{id}/statistics over from..to as the API
// answers it.
type apiStats struct {
	MessageCount int64 `json:"message_count"`
	DMARC        struct {
		Pass     int64   `json:"pass"`
		Fail     int64   `json:"fail"`
		PassRate float64 `json:"pass_rate"`
	} `json:"dmarc"`
}

func statsOf(t *testing.T, srv *httptest.Server, key, domainID string, from, to time.Time) apiStats {
	t.Helper()
	url := fmt.Sprintf("%s/api/v1/domains/%s/statistics?date_from=%d&date_to=%d", srv.URL, domainID, from.Unix(), to.Unix())
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", key)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	var st apiStats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFiguresEqualAPI builds the day and week digests of a month of
// reports and compares every domain's figures, this period's and the
// previous one's, with what the API's statistics answer for those days,
// and the text part's line of each domain with the API's pass rate as
// the web interface formats it.
func TestFiguresEqualAPI(t *testing.T) {
	e := newTestEnv(t)
	e.fill(t)
	_, key := storetest.MustAPIKey(t, e.DB, e.acme.ID, store.ScopeRead)
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: e.DB, Now: func() time.Time { return now }}))
	defer srv.Close()
	b := &digest.Builder{DB: e.DB}
	for _, p := range []digest.Period{digest.Day, digest.Week} {
		t.Run(string(p), func(t *testing.T) {
			d, err := b.Build(context.Background(), e.acme.ID, p, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Domains) != 2 {
				t.Fatalf("%d domains, want acme's 2", len(d.Domains))
			}
			msg, err := digest.Render(d, digest.RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var total, totalPass int64
			for _, dom := range d.Domains {
				if dom.ID == e.otherCom.ID {
					t.Fatal("another organization's domain is in the digest")
				}
				cur := statsOf(t, srv, key, dom.ID, d.From, d.To)
				prev := statsOf(t, srv, key, dom.ID, d.PrevFrom, d.PrevTo)
				if cur.MessageCount == 0 {
					t.Fatalf("%s: no mail in the period: the test proves nothing", dom.Name)
				}
				if dom.Messages != cur.MessageCount || dom.DMARCPass != cur.DMARC.Pass || dom.DMARCFail != cur.DMARC.Fail || dom.PassRate != cur.DMARC.PassRate {
					t.Errorf("%s: digest %d/%d/%d %v, API %+v", dom.Name, dom.Messages, dom.DMARCPass, dom.DMARCFail, dom.PassRate, cur)
				}
				if dom.PrevMessages != prev.MessageCount || dom.PrevDMARCPass != prev.DMARC.Pass || dom.PrevPassRate != prev.DMARC.PassRate {
					t.Errorf("%s previous: digest %d/%d %v, API %+v", dom.Name, dom.PrevMessages, dom.PrevDMARCPass, dom.PrevPassRate, prev)
				}
				total, totalPass = total+cur.MessageCount, totalPass+cur.DMARC.Pass
				want := fmt.Sprintf("%s: %s messages", dom.Name, numfmt.Count(cur.MessageCount))
				rate := "DMARC pass " + numfmt.Percent(cur.DMARC.PassRate)
				if !hasLine(msg.Text, want, rate) {
					t.Errorf("text part has no line %q ... %q:\n%s", want, rate, msg.Text)
				}
				if !strings.Contains(msg.HTML, numfmt.Percent(cur.DMARC.PassRate)) {
					t.Errorf("HTML part lacks %s's pass rate %s", dom.Name, numfmt.Percent(cur.DMARC.PassRate))
				}
			}
			if d.Messages != total || d.DMARCPass != totalPass {
				t.Errorf("totals %d/%d, the API's domains sum to %d/%d", d.Messages, d.DMARCPass, total, totalPass)
			}
			if !strings.Contains(msg.Subject, "acme") || !strings.Contains(msg.Subject, d.Period.Label(d.From, d.To)) {
				t.Errorf("subject %q names not the organization and the period", msg.Subject)
			}
		})
	}
}

// hasLine reports whether a line of s starts with prefix and holds part.
func hasLine(s, prefix, part string) bool {
	for _, l := range lines(s) {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, part) {
			return true
		}
	}
	return false
}

func TestBuildUnknownOrganization(t *testing.T) {
	e := newTestEnv(t)
	_, err := (&digest.Builder{DB: e.DB}).Build(context.Background(), "0123456789abcdef0123456789abcdef", digest.Day, now)
	if err == nil {
		t.Fatal("a digest of no organization")
	}
}
