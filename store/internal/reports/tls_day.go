package reports

import (
	"sort"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// TLSDay is the roll-up of one domain's TLS reports of one UTC day (by
// date_begin): sessions in all, by policy type, failed sessions by result
// type, by receiving MX host and by sending IP. The per-MX and per-IP maps
// keep at most maxTLSDayKeys entries each; the rest count under
// tlsOtherKey, so that a hostile reporter cannot make a day unbounded.
type TLSDay struct {
	Reports    int64               `json:"r"`
	Successful int64               `json:"s"`
	Failed     int64               `json:"f"`
	ByPolicy   map[string][2]int64 `json:"pt,omitempty"` // type -> successful, failed
	ByResult   map[string]int64    `json:"rt,omitempty"`
	ByMX       map[string]int64    `json:"mx,omitempty"`
	ByIP       map[string]int64    `json:"ip,omitempty"`
}

const (
	maxTLSDayKeys = 1000
	tlsOtherKey   = "(other)"
)

// Add counts report r into the day, sign 1 to add, -1 to take it out
// again (retention).
func (d *TLSDay) Add(r *TLSReportDetail, sign int64) {
	d.Reports += sign
	d.Successful += sign * r.SuccessfulSessions
	d.Failed += sign * r.FailedSessions
	for _, p := range r.Policies {
		if d.ByPolicy == nil {
			d.ByPolicy = map[string][2]int64{}
		}
		v := d.ByPolicy[p.PolicyType]
		v[0] += sign * p.SuccessfulSessions
		v[1] += sign * p.FailedSessions
		d.ByPolicy[p.PolicyType] = v
		for _, f := range p.FailureDetails {
			d.ByResult = addCapped(d.ByResult, f.ResultType, sign*f.FailedSessions)
			if f.ReceivingMXHostname != nil {
				d.ByMX = addCapped(d.ByMX, *f.ReceivingMXHostname, sign*f.FailedSessions)
			}
			if f.SendingMTAIP != nil {
				d.ByIP = addCapped(d.ByIP, *f.SendingMTAIP, sign*f.FailedSessions)
			}
		}
	}
}

// addCapped adds n to m[k], or to m[tlsOtherKey] when m is full; entries
// that fall to zero are removed.
func addCapped(m map[string]int64, k string, n int64) map[string]int64 {
	if m == nil {
		m = map[string]int64{}
	}
	if _, ok := m[k]; !ok && len(m) >= maxTLSDayKeys {
		k = tlsOtherKey
	}
	if m[k] += n; m[k] <= 0 {
		delete(m, k)
	}
	return m
}

// TLSStatistics are a domain's TLS sessions over a range of UTC days,
// from the daily roll-ups.
type TLSStatistics struct {
	DomainID           string           `json:"domain_id"`
	DateFrom           time.Time        `json:"date_from"`
	DateTo             time.Time        `json:"date_to"`
	ReportCount        int64            `json:"report_count"`
	SuccessfulSessions int64            `json:"successful_sessions"`
	FailedSessions     int64            `json:"failed_sessions"`
	FailureRate        float64          `json:"failure_rate"`
	ByDay              []TLSDayStats    `json:"by_day"`
	ByResultType       []TLSResultStats `json:"by_result_type"`
	ByPolicyType       []TLSPolicyStats `json:"by_policy_type"`
	TopReceivingMX     []TLSMXStats     `json:"top_receiving_mx"`
	TopSendingIPs      []TLSIPStats     `json:"top_sending_ips"`
}

// TLSDayStats are one UTC day's sessions.
type TLSDayStats struct {
	Date               string `json:"date"`
	SuccessfulSessions int64  `json:"successful_sessions"`
	FailedSessions     int64  `json:"failed_sessions"`
	Reports            int64  `json:"reports"`
}

// TLSResultStats are the failed sessions of one result type.
type TLSResultStats struct {
	ResultType     string `json:"result_type"`
	FailedSessions int64  `json:"failed_sessions"`
}

// TLSPolicyStats are the sessions under one policy type.
type TLSPolicyStats struct {
	PolicyType         string `json:"policy_type"`
	SuccessfulSessions int64  `json:"successful_sessions"`
	FailedSessions     int64  `json:"failed_sessions"`
}

// TLSMXStats are the failed sessions with one receiving MX host.
type TLSMXStats struct {
	ReceivingMXHostname string `json:"receiving_mx_hostname"`
	FailedSessions      int64  `json:"failed_sessions"`
}

// TLSIPStats are the failed sessions from one sending IP.
type TLSIPStats struct {
	SendingMTAIP   string `json:"sending_mta_ip"`
	FailedSessions int64  `json:"failed_sessions"`
}

// topTLS is how many MX hosts and sending IPs the statistics list.
const topTLS = 10

// TLSStatisticsOf returns the statistics of domain domainID over the UTC
// days from..to, from the roll-ups of its days (a day without one had no
// report).
func TLSStatisticsOf(domainID string, from, to uint32, rolls map[uint32]*TLSDay) *TLSStatistics {
	st := &TLSStatistics{DomainID: domainID, DateFrom: days.Start(from), DateTo: days.Start(to),
		ByDay: make([]TLSDayStats, 0, to-from+1)}
	byPolicy := map[string][2]int64{}
	byResult, byMX, byIP := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for day := from; day <= to; day++ {
		ds := TLSDayStats{Date: days.Date(day)}
		if d := rolls[day]; d != nil {
			ds.SuccessfulSessions, ds.FailedSessions, ds.Reports = d.Successful, d.Failed, d.Reports
			for k, v := range d.ByPolicy {
				t := byPolicy[k]
				byPolicy[k] = [2]int64{t[0] + v[0], t[1] + v[1]}
			}
			mergeCounts(byResult, d.ByResult)
			mergeCounts(byMX, d.ByMX)
			mergeCounts(byIP, d.ByIP)
		}
		st.ByDay = append(st.ByDay, ds)
		st.ReportCount += ds.Reports
		st.SuccessfulSessions += ds.SuccessfulSessions
		st.FailedSessions += ds.FailedSessions
	}
	if n := st.SuccessfulSessions + st.FailedSessions; n > 0 {
		st.FailureRate = float64(st.FailedSessions) / float64(n)
	}
	st.ByPolicyType = []TLSPolicyStats{}
	for k, v := range byPolicy {
		st.ByPolicyType = append(st.ByPolicyType, TLSPolicyStats{PolicyType: k, SuccessfulSessions: v[0], FailedSessions: v[1]})
	}
	sort.Slice(st.ByPolicyType, func(i, j int) bool { return st.ByPolicyType[i].PolicyType < st.ByPolicyType[j].PolicyType })
	st.ByResultType = []TLSResultStats{}
	for _, kv := range sortedCounts(byResult, 0) {
		st.ByResultType = append(st.ByResultType, TLSResultStats{ResultType: kv.k, FailedSessions: kv.n})
	}
	st.TopReceivingMX = []TLSMXStats{}
	for _, kv := range sortedCounts(byMX, topTLS) {
		st.TopReceivingMX = append(st.TopReceivingMX, TLSMXStats{ReceivingMXHostname: kv.k, FailedSessions: kv.n})
	}
	st.TopSendingIPs = []TLSIPStats{}
	for _, kv := range sortedCounts(byIP, topTLS) {
		st.TopSendingIPs = append(st.TopSendingIPs, TLSIPStats{SendingMTAIP: kv.k, FailedSessions: kv.n})
	}
	return st
}

func mergeCounts(dst, src map[string]int64) {
	for k, v := range src {
		dst[k] += v
	}
}

type keyCount struct {
	k string
	n int64
}

// sortedCounts orders m by count, largest first, ties by key; at most max
// entries when max > 0.
func sortedCounts(m map[string]int64, max int) []keyCount {
	out := make([]keyCount, 0, len(m))
	for k, n := range m {
		out = append(out, keyCount{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].k < out[j].k
	})
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}
