package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// failure describes one failure report of a generated report mail.
type failure struct {
	feedbackType string // "" means auth-failure
	sourceIP     string // "" leaves Source-IP out
	authFailure  string
	arrival      time.Time
	messageID    string
	domain       string
}

// failureMail is an RFC 6591 report mail holding fs, each with a copy of
// its original message (headers and a body that must never be stored).
func failureMail(from, to string, fs ...failure) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: DMARC failure report\r\nMIME-Version: 1.0\r\n", from, to)
	b.WriteString("Content-Type: multipart/report; report-type=feedback-report; boundary=\"rr\"\r\n\r\n")
	b.WriteString("--rr\r\nContent-Type: text/plain\r\n\r\nAuthentication failure reports.\r\n")
	for _, f := range fs {
		if f.feedbackType == "" {
			f.feedbackType = "auth-failure"
		}
		fmt.Fprintf(&b, "--rr\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: %s\r\nVersion: 1\r\n", f.feedbackType)
		fmt.Fprintf(&b, "Original-Mail-From: <bounce@evil.test>\r\nOriginal-Rcpt-To: <user@%s>\r\n", f.domain)
		fmt.Fprintf(&b, "Arrival-Date: %s\r\nReporting-MTA: dns; mx.receiver.test\r\nReported-Domain: %s\r\n", f.arrival.Format(time.RFC1123Z), f.domain)
		if f.sourceIP != "" {
			b.WriteString("Source-IP: " + f.sourceIP + "\r\n")
		}
		fmt.Fprintf(&b, "Auth-Failure: %s\r\nDelivery-Result: reject\r\n\r\n", f.authFailure)
		fmt.Fprintf(&b, "--rr\r\nContent-Type: text/rfc822-headers\r\n\r\nFrom: <ceo@%s>\r\nTo: <user@%s>\r\nSubject: Urgent invoice\r\nMessage-ID: <%s>\r\n\r\n",
			f.domain, f.domain, f.messageID)
	}
	b.WriteString("--rr--\r\n")
	return b.Bytes()
}

// failureList lists failure reports with query q and returns their ids
// and the total.
func (s *Server) failureList(key, q string) ([]string, int) {
	s.t.Helper()
	r := s.Must(http.StatusOK, "GET", "/api/v1/forensic-reports?"+q, key, nil)
	ids := []string{}
	data, _ := r["data"].([]any)
	for _, d := range data {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	pag, _ := r["pagination"].(map[string]any)
	total, _ := pag["total"].(float64)
	return ids, int(total)
}

// TestFailureEndToEnd ensures failure reports sent by SMTP to the real
// binary are stored (once), mapped to the recipient's domain, geolocated,
// and read back through every forensic-reports endpoint and filter; that unusable
// ones are quarantined whole; and that plan gating and bad filters answer
// as API.md says.
func TestFailureEndToEnd(t *testing.T) {
	s := StartServer(t, Options{Args: geoArgs()})
	addr := s.SMTPAddr()
	id1, email1 := s.CreateDomain("example.com")
	id2, email2 := s.CreateDomain("example.org")
	const from = "dmarc-reports@receiver.test"
	now := time.Now().UTC().Truncate(time.Second)
	fs := []failure{
		{sourceIP: "81.2.69.142", authFailure: "dmarc", arrival: now.Add(-1 * time.Minute), messageID: "m1@evil.test", domain: "example.com"},
		{sourceIP: "89.160.20.112", authFailure: "spf", arrival: now.Add(-2 * time.Minute), messageID: "m2@evil.test", domain: "example.com"},
		{sourceIP: "81.2.69.142", authFailure: "dkim", arrival: now.Add(-3 * time.Minute), messageID: "m3@evil.test", domain: "example.org"},
		{authFailure: "dmarc", arrival: now.Add(-4 * time.Minute), messageID: "m4@evil.test", domain: "example.com"},
		{sourceIP: "2001:db8::25", authFailure: "bodyhash", arrival: now.Add(-5 * time.Minute), messageID: "m5@evil.test", domain: "example.org"},
	}
	for _, m := range []struct {
		to string
		fs []failure
	}{
		{email1, fs[0:1]}, {email1, fs[1:2]}, {email2, fs[2:3]}, {email1, fs[3:4]},
		{email2, []failure{fs[2], fs[4]}}, // one already stored and a new one, in one mail
		{email1, fs[0:1]},                 // the first again
		{email2, fs[1:2]},                 // a report about example.com sent to example.org's address
	} {
		if err := sendMail(addr, from, []string{m.to}, failureMail(from, m.to, m.fs...)); err != nil {
			t.Fatalf("sending: %v", err)
		}
	}
	key := s.Key
	ids, total := s.failureList(key, "limit=100")
	if total != 6 || len(ids) != 6 {
		t.Fatalf("%d failure reports listed, want 6 (5 distinct, one sent to another domain's address)", total)
	}

	// Every filter, alone and combined.
	for _, c := range []struct {
		q    string
		want int
	}{
		{"domain_id=" + id1, 3}, {"domain_id=" + id2, 3},
		{"source_ip=81.2.69.142", 2}, {"source_ip=2001:db8:0::25", 1}, {"source_ip=192.0.2.1", 0},
		{"auth_failure=dmarc", 2}, {"auth_failure=spf", 2}, {"auth_failure=dkim", 2},
		{"auth_failure=spf&domain_id=" + id2, 1},
		{"date_from=" + strconv.FormatInt(now.Add(-150*time.Second).Unix(), 10), 3},
		{"date_to=" + strconv.FormatInt(now.Add(-150*time.Second).Unix(), 10), 3},
		{"date_from=" + strconv.FormatInt(now.Add(-3*time.Minute).Unix(), 10) + "&date_to=" + strconv.FormatInt(now.Add(-3*time.Minute).Unix(), 10), 1},
		{"limit=4&page=2", 6},
	} {
		got, n := s.failureList(key, c.q)
		if c.q == "limit=4&page=2" {
			if n != 6 || len(got) != 2 || !slices.Equal(got, ids[4:]) {
				t.Errorf("page 2 of 4: %v (total %d), want %v", got, n, ids[4:])
			}
			continue
		}
		if n != c.want || len(got) != c.want {
			t.Errorf("%s: %d reports (%d on the page), want %d", c.q, n, len(got), c.want)
		}
	}

	// The single report: fields, geolocation, headers, no body.
	first, _ := s.failureList(key, "source_ip=81.2.69.142&domain_id="+id1)
	rep := s.Must(http.StatusOK, "GET", "/api/v1/forensic-reports/"+first[0], key, nil)
	geo, _ := rep["geo"].(map[string]any)
	if rep["domain"] != "example.com" || rep["reported_domain"] != "example.com" || rep["message_id"] != "m1@evil.test" ||
		rep["subject"] != "Urgent invoice" || rep["arrival_date"] != fs[0].arrival.Format(time.RFC3339) ||
		rep["original_mail_from"] != "bounce@evil.test" || rep["reporter"] != "mx.receiver.test" ||
		geo == nil || geo["country_code"] != "GB" {
		t.Errorf("report %v", rep)
	}
	headers, _ := rep["headers"].([]any)
	if len(headers) != 4 || headers[2].(map[string]any)["value"] != "Urgent invoice" {
		t.Errorf("headers %v", rep["headers"])
	}
	noIP, _ := s.failureList(key, "auth_failure=dmarc&date_to="+strconv.FormatInt(fs[3].arrival.Unix(), 10))
	if len(noIP) != 1 {
		t.Fatalf("the report without a source IP: %v", noIP)
	}
	if r := s.Must(http.StatusOK, "GET", "/api/v1/forensic-reports/"+noIP[0], key, nil); r["source_ip"] != nil || r["geo"] != nil {
		t.Errorf("no Source-IP: source_ip %v geo %v, want null", r["source_ip"], r["geo"])
	}

	// Summary (today's data) and statistics.
	sum := s.Must(http.StatusOK, "GET", "/api/v1/forensic-reports/summary", key, nil)
	byDay, _ := sum["by_day"].([]any)
	if sum["total"] != 6.0 || len(byDay) != 7 {
		t.Fatalf("summary %v", sum)
	}
	for _, d := range byDay {
		row := d.(map[string]any)
		want := 0.0
		for i, f := range fs {
			n := map[int]float64{0: 1, 1: 2, 2: 1, 3: 1, 4: 1}[i] // m2 is stored twice (two domains)
			if f.arrival.Format(time.DateOnly) == row["date"] {
				want += n
			}
		}
		if row["count"] != want {
			t.Errorf("by_day %v: want %v", row, want)
		}
	}
	if last := byDay[6].(map[string]any)["date"]; last != time.Now().UTC().Format(time.DateOnly) && last != now.Format(time.DateOnly) {
		t.Errorf("the last by_day row is %v, not today", last)
	}
	if got := sum["by_auth_failure"]; fmt.Sprint(got) != "map[dkim:2 dmarc:2 spf:2]" {
		t.Errorf("by_auth_failure %v", got)
	}
	top, _ := sum["top_source_ips"].([]any)
	if len(top) != 3 || top[0].(map[string]any)["source_ip"] != "81.2.69.142" && top[0].(map[string]any)["source_ip"] != "89.160.20.112" {
		t.Errorf("top_source_ips %v", top)
	}
	st := s.Must(http.StatusOK, "GET", "/api/v1/forensic-reports/statistics?domain_id="+id1, key, nil)
	asns, _ := st["by_asn"].([]any)
	if st["total"] != 3.0 || len(asns) < 2 {
		t.Errorf("statistics of example.com: %v", st)
	}

	// Bad filters are 400; another starter organization gets 403 on every endpoint.
	for _, q := range []string{"auth_failure=foo", "source_ip=not-an-ip", "date_from=soon", "domain_id=x"} {
		if r := s.Do("GET", "/api/v1/forensic-reports?"+q, key, nil); r.Status != http.StatusBadRequest || r.ErrorCode(t) != "bad_request" {
			t.Errorf("%s: %d %s", q, r.Status, r.Body)
		}
	}
	dd := "--data-dir=" + s.DataDir
	MustCLI(t, dd, "org", "create", "small", "--plan", "starter")
	starter := keyRE.FindString(MustCLI(t, dd, "keys", "create", "--org", "small", "--name", "k").Stdout)
	for _, p := range []string{"", "/" + ids[0], "/summary", "/statistics", "?auth_failure=foo"} {
		if r := s.Do("GET", "/api/v1/forensic-reports"+p, starter, nil); r.Status != http.StatusForbidden || r.ErrorCode(t) != "plan_feature_unavailable" {
			t.Errorf("starter GET %s: %d %s", p, r.Status, r.Body)
		}
	}

	// Deleting a domain deletes its failure reports.
	s.Must(http.StatusNoContent, "DELETE", "/api/v1/domains/"+id2, key, nil)
	if _, total := s.failureList(key, ""); total != 3 {
		t.Errorf("after deleting example.org: %d failure reports, want 3", total)
	}
	s.WaitLog("ingested") // the log is its own pipe, and may trail the API
	if strings.Contains(s.Stderr(), "Urgent invoice") {
		t.Error("the log shows a reported message's subject")
	}
}

// TestFailureBadInputEndToEnd ensures failure report mails that cannot be
// stored (an abuse report, a feedback part of 10 MB, MIME nested too deep)
// are accepted and quarantined byte for byte with their reason.
func TestFailureBadInputEndToEnd(t *testing.T) {
	s := StartServer(t, Options{})
	addr := s.SMTPAddr()
	_, email := s.CreateDomain("example.com")
	const from = "dmarc-reports@receiver.test"
	abuse := failureMail(from, email, failure{feedbackType: "abuse", sourceIP: "192.0.2.1", authFailure: "dmarc",
		arrival: time.Now(), messageID: "a@b", domain: "example.com"})
	huge := failureMail(from, email, failure{sourceIP: "192.0.2.1", authFailure: "dmarc", arrival: time.Now(), messageID: "h@b", domain: "example.com"})
	pad := "X-Padding: " + strings.Repeat("p", 998) + "\r\n"
	huge = bytes.Replace(huge, []byte("Delivery-Result: reject\r\n"), []byte("Delivery-Result: reject\r\n"+strings.Repeat(pad, 10<<10)), 1)
	var deep strings.Builder
	deep.WriteString("From: " + from + "\r\nTo: " + email + "\r\nSubject: deep\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b0\"\r\n\r\n")
	for i := range 30 {
		fmt.Fprintf(&deep, "--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", i, i+1)
	}
	deep.WriteString("--b30\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: auth-failure\r\nSource-IP: 192.0.2.1\r\n\r\n--b30--\r\n")
	sent := []struct {
		msg    []byte
		reason string
	}{
		{abuse, `feedback type "abuse": not a DMARC failure report`},
		{huge, "exceeds size limits"},
		{[]byte(deep.String()), "exceeds size limits"},
	}
	for _, m := range sent {
		if err := sendMail(addr, from, []string{email}, m.msg); err != nil {
			t.Fatalf("sending (%d bytes): %v", len(m.msg), err)
		}
	}
	var q struct {
		Data []store.QuarantineEntry `json:"data"`
	}
	out := MustCLI(t, "--data-dir", s.DataDir, "quarantine", "list", "--json")
	if err := json.Unmarshal([]byte(out.Stdout), &q); err != nil {
		t.Fatalf("quarantine list: %v\n%s", err, out.Stdout)
	}
	if len(q.Data) != len(sent) {
		t.Fatalf("%d quarantined, want %d: %+v", len(q.Data), len(sent), q.Data)
	}
	for _, m := range sent {
		i := slices.IndexFunc(q.Data, func(e store.QuarantineEntry) bool { return e.Size == int64(len(m.msg)) })
		if i < 0 {
			t.Errorf("no quarantine entry of %d bytes", len(m.msg))
			continue
		}
		e := q.Data[i]
		raw := MustCLI(t, "--data-dir", s.DataDir, "quarantine", "show", e.ID, "--raw").Stdout
		if !strings.Contains(e.Reason, m.reason) || raw != string(m.msg) {
			t.Errorf("entry %s: reason %q (want %q), %d bytes kept of %d", e.ID, e.Reason, m.reason, len(raw), len(m.msg))
		}
	}
	if _, total := s.failureList(s.Key, ""); total != 0 {
		t.Errorf("%d failure reports stored from unusable mails", total)
	}
}

// TestFailureRetentionEndToEnd ensures a server started with
// --failure-retention deletes, at start, the failure reports that arrived
// longer ago, and keeps the others.
func TestFailureRetentionEndToEnd(t *testing.T) {
	s := StartServer(t, Options{})
	key := s.Key
	_, email := s.CreateDomain("example.com")
	const from = "dmarc-reports@receiver.test"
	now := time.Now().UTC().Truncate(time.Second)
	mail := failureMail(from, email,
		failure{sourceIP: "192.0.2.1", authFailure: "dmarc", arrival: now.Add(-3 * time.Hour), messageID: "old@x", domain: "example.com"},
		failure{sourceIP: "192.0.2.2", authFailure: "dmarc", arrival: now.Add(-time.Minute), messageID: "new@x", domain: "example.com"})
	if err := sendMail(s.SMTPAddr(), from, []string{email}, mail); err != nil {
		t.Fatal(err)
	}
	if _, total := s.failureList(key, ""); total != 2 {
		t.Fatalf("%d failure reports, want 2", total)
	}
	s.Stop()
	s2 := StartServer(t, Options{DataDir: s.DataDir, Args: []string{"--failure-retention", "2h"}})
	if entry := s2.waitLogWhere("retention deleted old data", "what", "failure reports"); entry["count"] != 1.0 {
		t.Errorf("retention log line %v", entry)
	}
	if ids, total := s2.failureList(key, "source_ip=192.0.2.2"); total != 1 || len(ids) != 1 {
		t.Errorf("the recent report is gone")
	}
	if _, total := s2.failureList(key, ""); total != 1 {
		t.Errorf("%d failure reports after retention, want 1", total)
	}
}

// waitLogWhere waits up to 30s for a log line with this message and
// attribute value, and returns it.
func (s *Server) waitLogWhere(msg, attr string, value any) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(s.Stderr(), "\n") {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == msg && entry[attr] == value {
				return entry
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("no log line %q with %s=%v within 30s:\n%s", msg, attr, value, s.Stderr())
	return nil
}
