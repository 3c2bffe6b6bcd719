package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// tlsDay is the roll-up of one domain's TLS reports of one UTC day (by
// date_begin): sessions in all, by policy type, failed sessions by result
// type, by receiving MX host and by sending IP. The per-MX and per-IP maps
// keep at most maxTLSDayKeys entries each; the rest count under
// tlsOtherKey, so that a hostile reporter cannot make a day unbounded.
type tlsDay struct {
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

// tlsRollupKey is domain id | UTC day number (big-endian).
func tlsRollupKey(domainID string, day uint32) []byte {
	k := make([]byte, 0, idLen+4)
	k = append(k, domainID...)
	return binary.BigEndian.AppendUint32(k, day)
}

// tlsDays holds the roll-ups a transaction changes, written once at its end.
type tlsDays map[string]*tlsDay

// get loads the roll-up of key, from the transaction the first time.
func (ds tlsDays) get(tx *bolt.Tx, key []byte) (*tlsDay, error) {
	if d, ok := ds[string(key)]; ok {
		return d, nil
	}
	d := &tlsDay{}
	if raw := tx.Bucket(bucketTLSRollups).Get(key); raw != nil {
		if err := json.Unmarshal(raw, d); err != nil {
			return nil, fmt.Errorf("decode TLS roll-up %x: %w", key, err)
		}
	}
	ds[string(key)] = d
	return d, nil
}

// add counts report r into its day's roll-up, sign 1 to add, -1 to take
// it out again (retention).
func (ds tlsDays) add(tx *bolt.Tx, r *TLSReportDetail, sign int64) error {
	d, err := ds.get(tx, tlsRollupKey(r.DomainID, days.Of(r.DateBegin)))
	if err != nil {
		return err
	}
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
	return nil
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

// put writes every changed roll-up, deleting those left with no report.
func (ds tlsDays) put(tx *bolt.Tx) error {
	b := tx.Bucket(bucketTLSRollups)
	for k, d := range ds {
		if d.Reports <= 0 {
			if err := b.Delete([]byte(k)); err != nil {
				return err
			}
			continue
		}
		raw, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if err := b.Put([]byte(k), raw); err != nil {
			return err
		}
	}
	return nil
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

// TLSStatistics returns the TLS statistics of domain domainID of
// organization orgID over the UTC days from from to to (both included, at
// most 366), read from the roll-ups only. Errors: ErrNotFound for a domain
// of another organization, ErrRangeReversed or ErrRangeTooLong as
// DomainStatistics.
func (db *DB) TLSStatistics(orgID, domainID string, from, to time.Time) (*TLSStatistics, error) {
	fromDay, toDay, err := statsDays(from, to)
	if err != nil {
		return nil, err
	}
	st := &TLSStatistics{DomainID: domainID, DateFrom: days.Start(fromDay), DateTo: days.Start(toDay),
		ByDay: make([]TLSDayStats, 0, toDay-fromDay+1)}
	byPolicy := map[string][2]int64{}
	byResult, byMX, byIP := map[string]int64{}, map[string]int64{}, map[string]int64{}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrgDomain(tx, orgID, domainID); err != nil {
			return err
		}
		c := tx.Bucket(bucketTLSRollups).Cursor()
		end := tlsRollupKey(domainID, toDay)
		rolls := map[uint32]*tlsDay{}
		for k, v := c.Seek(tlsRollupKey(domainID, fromDay)); k != nil && string(k) <= string(end); k, v = c.Next() {
			if len(k) != idLen+4 {
				continue
			}
			d := &tlsDay{}
			if err := json.Unmarshal(v, d); err != nil {
				return fmt.Errorf("decode TLS roll-up %x: %w", k, err)
			}
			rolls[binary.BigEndian.Uint32(k[idLen:])] = d
		}
		for day := fromDay; day <= toDay; day++ {
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
		return nil
	})
	if err != nil {
		return nil, wrap("TLS statistics", err)
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
	return st, nil
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
