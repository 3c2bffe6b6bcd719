package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/smtp"
	"net/textproto"
	"path/filepath"
	"strings"
	"time"
)

// Intake helpers: an SMTP client, report mails, and reading reports back.

// geoArgs are the serve flags for the MaxMind test databases.
func geoArgs() []string {
	dir := filepath.Join("..", "testdata", "geo")
	return []string{"--geoip-city", filepath.Join(dir, "GeoIP2-City-Test.mmdb"), "--geoip-asn", filepath.Join(dir, "GeoLite2-ASN-Test.mmdb")}
}

// SMTPAddr returns the address of the SMTP listener, from the start-up log.
func (s *Server) SMTPAddr() string {
	s.t.Helper()
	sc := bufio.NewScanner(strings.NewReader(s.Stderr()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var entry struct {
			Msg  string `json:"msg"`
			SMTP string `json:"smtp"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Msg == "dmarcd started" {
			if entry.SMTP == "" {
				s.t.Fatal("the server runs no SMTP listener (start it with --smtp-listen 127.0.0.1:0)")
			}
			return entry.SMTP
		}
	}
	s.t.Fatalf("no start-up line in the log:\n%s", s.Stderr())
	return ""
}

// WaitLog waits up to 30s for a log line with this message and returns it.
func (s *Server) WaitLog(msg string) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(s.Stderr(), "\n") {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil && entry["msg"] == msg {
				return entry
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("no log line %q within 30s:\n%s", msg, s.Stderr())
	return nil
}

// CreateDomain registers name with the bootstrap key and returns its id
// and reporting address.
func (s *Server) CreateDomain(name string) (id, email string) {
	s.t.Helper()
	d := s.Must(http.StatusCreated, "POST", "/api/v1/domains", s.Key, map[string]string{"name": name})
	id, _ = d["id"].(string)
	email, _ = d["reporting_email"].(string)
	return id, email
}

// Reports lists the reports of a domain (first 100) and the total.
func (s *Server) Reports(domainID string) ([]map[string]any, int) {
	s.t.Helper()
	r := s.Must(http.StatusOK, "GET", "/api/v1/reports?limit=100&domain_id="+domainID, s.Key, nil)
	var out []map[string]any
	data, _ := r["data"].([]any)
	for _, d := range data {
		out = append(out, d.(map[string]any))
	}
	pag, _ := r["pagination"].(map[string]any)
	total, _ := pag["total"].(float64)
	return out, int(total)
}

// sendMail delivers msg with the standard library's SMTP client.
func sendMail(addr, from string, to []string, msg []byte) error {
	return smtp.SendMail(addr, nil, from, to, msg)
}

// smtpReply returns the reply code and text of a failed SMTP command.
func smtpReply(err error) (int, string) {
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code, te.Msg
	}
	return 0, fmt.Sprint(err)
}
