package alert_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/alert"
)

// history is an alert.History over plain maps: what a store would hold.
type history struct {
	raised     map[alert.DedupKey]string // key -> severity
	seen       map[string][]uint32       // source IP -> UTC days it was seen
	hasSources bool
}

func newHistory() *history {
	return &history{raised: map[alert.DedupKey]string{}, seen: map[string][]uint32{}, hasSources: true}
}

func (h *history) Raised(k alert.DedupKey) (string, bool) {
	s, ok := h.raised[k]
	return s, ok
}

func (h *history) RaisedCount(day uint32, domainID, typ string) int {
	n := 0
	for k := range h.raised {
		if k.Day == day && k.DomainID == domainID && k.Type == typ {
			n++
		}
	}
	return n
}

func (h *history) HasSources(string) bool { return h.hasSources }

func (h *history) SeenSource(_, ip string, from, to uint32) bool {
	for _, d := range h.seen[ip] {
		if d >= from && d <= to {
			return true
		}
	}
	return false
}

// now is the time the tests store reports at: 2026-11-22 09:30 UTC.
var now = time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC)

// today is now's UTC day.
var today = alert.Day(now)

// detailsOf returns a candidate's details as JSON decoded into a map.
func detailsOf(t *testing.T, c alert.Candidate) map[string]any {
	t.Helper()
	raw, err := json.Marshal(c.Details)
	if err != nil {
		t.Fatalf("details of %s do not encode: %v", c.Type, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("details of %s are not a JSON object: %s", c.Type, raw)
	}
	return m
}

// TestDay ensures Day counts UTC days from 1970 and clamps times before.
func TestDay(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want uint32
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(-1, 0), 0},
		{time.Unix(86399, 0), 0},
		{time.Unix(86400, 0), 1},
		{time.Date(2026, 11, 22, 23, 59, 59, 0, time.FixedZone("X", -3600)), 20780}, // 2026-11-23 UTC,
	} {
		if got := alert.Day(c.t); got != c.want {
			t.Errorf("Day(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}

// TestTypesAndSeverities ensures every type is valid, and severities rank
// in their order.
func TestTypesAndSeverities(t *testing.T) {
	for _, typ := range []string{alert.TypeDMARCFailureRate, alert.TypeNewFailingSource, alert.TypeFailureReportReceived,
		alert.TypeDNSRecordChanged, alert.TypeDNSRecordMissing, alert.TypePolicyWeakened, alert.TypeReportingAddressRemoved} {
		if !alert.ValidType(typ) {
			t.Errorf("%s is not valid", typ)
		}
	}
	if alert.ValidType("") || alert.ValidType("forensic") {
		t.Error("an unknown type is valid")
	}
	if !(alert.Rank(alert.SeverityInfo) == 1 && alert.Rank(alert.SeverityWarning) == 2 && alert.Rank(alert.SeverityCritical) == 3) ||
		alert.Rank("") != 0 || alert.Rank("Critical") != 0 {
		t.Error("severities rank out of order")
	}
}

// TestRulesValidate ensures the defaults are valid and each bad setting
// is refused.
func TestRulesValidate(t *testing.T) {
	if err := alert.DefaultRules().Validate(); err != nil {
		t.Fatalf("default rules: %v", err)
	}
	for name, set := range map[string]func(r *alert.Rules){
		"zero warning":           func(r *alert.Rules) { r.FailureRateWarning = 0 },
		"warning over 1":         func(r *alert.Rules) { r.FailureRateWarning, r.FailureRateCritical = 1.5, 2 },
		"critical below warning": func(r *alert.Rules) { r.FailureRateCritical = 0.05 },
		"critical over 1":        func(r *alert.Rules) { r.FailureRateCritical = 1.01 },
		"no failing minimum":     func(r *alert.Rules) { r.MinFailing = 0 },
		"no window":              func(r *alert.Rules) { r.NewSourceDays = 0 },
		"window of ages":         func(r *alert.Rules) { r.NewSourceDays = 3651 },
		"no report age":          func(r *alert.Rules) { r.MaxReportAge = 0 },
		"no cap":                 func(r *alert.Rules) { r.MaxNewSourceAlerts = 0 },
	} {
		r := alert.DefaultRules()
		set(&r)
		if err := r.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
}
