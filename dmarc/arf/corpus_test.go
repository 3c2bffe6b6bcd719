package arf

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"
)

// failCorpusDir holds the failure samples copied from parsedmarc (see
// ../testdata/corpus/README.md).
const failCorpusDir = "../../testdata/corpus/failure"

// failCorpusWant is what one corpus sample must yield, read off the file
// by hand.
type failCorpusWant struct {
	file           string
	sourceIP       string
	authFailure    []string
	reportedDomain string
	arrival        time.Time
	reporter       string
	version        string
	delivery       string
	mailFrom       string
	rcptTo         []string
	subject        string
	messageID      string
	authResults    map[string]string
	body           []string // text of the original's body, never to be found in the result
}

func failCorpus() []failCorpusWant {
	linkedin := failCorpusWant{
		sourceIP: "10.10.10.10", authFailure: []string{"dmarc"}, reportedDomain: "example.com",
		arrival:  time.Date(2019, 4, 30, 2, 9, 0, 0, time.UTC),
		reporter: "linkedin.com", version: "1.0", delivery: "delivered",
		mailFrom: "", rcptTo: []string{"recipient@linkedin.com"},
		subject:     "Subject line, could be UTF8 encoded",
		messageID:   "01010101010101010101010101010101@ABAB01MS0016.someserver.loc",
		authResults: map[string]string{"dmarc": "fail", "spf": "neutral", "dkim": "none"},
		body:        []string{"Alternative", "HTML Text", "<body>"},
	}
	lf, crlf := linkedin, linkedin
	lf.file, crlf.file = "dmarc_ruf_report_linkedin.eml", "dmarc_ruf_report_linkedin.crlf.eml"
	return []failCorpusWant{
		{
			file:     "DMARC Failure Report for domain.de (mail-from=sharepoint@domain.de, ip=10.10.10.10).eml",
			sourceIP: "10.10.10.10", authFailure: []string{"dmarc"}, reportedDomain: "domain.de",
			arrival:  time.Date(2018, 10, 1, 9, 20, 27, 0, time.UTC),
			reporter: "domain.de", version: "1.0", delivery: "smg-policy-action",
			mailFrom: "sharepoint@domain.de", rcptTo: []string{"peter.pan@domain.de"},
			subject: "Subject", messageID: "38.E7.30937.BD6E1BB5@mailrelay.de",
			authResults: map[string]string{"dmarc": "fail"},
			body:        []string{"wettbewerb", "DOCTYPE", "MS Exchange Server"},
		},
		{
			file:     "[Netease DMARC Failure Report] Rent Reminder.eml",
			sourceIP: "167.89.69.24", authFailure: []string{"dmarc"}, reportedDomain: "cardinal.com",
			arrival:  time.Date(2018, 9, 28, 8, 48, 42, 0, time.UTC),
			reporter: "163.com", version: "1", delivery: "delivered",
			mailFrom: "bounces+1137616-c1ad-xsj399=163.com@email.entrata.com",
			subject:  "Rent Reminder", messageID: "oguVx1AxQayV5Sv2nYK-rA@ismtpd0007p1las1.sendgrid.net",
			authResults: map[string]string{"dmarc": "fail", "spf": "pass", "dkim": "pass"},
		},
		lf, crlf,
		{
			file:     "exim_plain_text_only_no_arf_part.eml",
			sourceIP: "203.0.113.68", authFailure: []string{"dmarc", "spf", "dkim"}, reportedDomain: "example.com",
			arrival:  time.Date(2025, 4, 7, 21, 16, 9, 0, time.UTC),
			reporter: "node01.mailgate.example.net",
			subject:  "Payment from your account.", messageID: "134117F8-2145-AECE-9CCA-25FC98731341@example.com",
			authResults: map[string]string{"dmarc": "none", "spf": "softfail", "dkim": "fail"},
		},
	}
}

func mustExtractFailureFile(tb testing.TB, name string) []*Report {
	tb.Helper()
	f, err := os.Open(filepath.Join(failCorpusDir, name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	reps, err := Extract(f, container.Limits{})
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return reps
}

// TestFailureCorpus ensures every failure sample of the corpus yields one
// report with its source IP, auth failure, reported domain, arrival date
// and the other fields the file states, and none of the original's body.
func TestFailureCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(failCorpusDir, "*.eml")) // no '[' in the directory name
	if err != nil {
		t.Fatal(err)
	}
	want := failCorpus()
	if len(files) != len(want) {
		t.Fatalf("%d samples in %s, %d in the table", len(files), failCorpusDir, len(want))
	}
	for _, w := range want {
		t.Run(w.file, func(t *testing.T) {
			reps := mustExtractFailureFile(t, w.file)
			if len(reps) != 1 {
				t.Fatalf("%d reports, want 1", len(reps))
			}
			r := reps[0]
			failCheckCorpus(t, r, w)
			js, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range w.body {
				if strings.Contains(string(js), b) {
					t.Errorf("the original's body text %q is in the report", b)
				}
			}
		})
	}
}

func failCheckCorpus(t *testing.T, r *Report, w failCorpusWant) {
	t.Helper()
	checks := []struct {
		field     string
		got, want any
	}{
		{"SourceIP", r.SourceIP, netip.MustParseAddr(w.sourceIP)},
		{"AuthFailure", r.AuthFailure, w.authFailure},
		{"ReportedDomain", r.ReportedDomain, w.reportedDomain},
		{"ArrivalDate", r.ArrivalDate, w.arrival},
		{"FeedbackType", r.FeedbackType, "auth-failure"},
		{"Reporter", r.Reporter, w.reporter},
		{"Version", r.Version, w.version},
		{"DeliveryResult", r.DeliveryResult, w.delivery},
		{"OriginalMailFrom", r.OriginalMailFrom, w.mailFrom},
		{"OriginalRcptTo", r.OriginalRcptTo, w.rcptTo},
		{"Subject", r.Subject, w.subject},
		{"MessageID", r.MessageID, w.messageID},
		{"AuthResults", r.AuthResults, w.authResults},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.field, c.got, c.want)
		}
	}
	if r.ArrivalDate.Location() != time.UTC {
		t.Errorf("ArrivalDate in %v, want UTC", r.ArrivalDate.Location())
	}
	if len(r.Headers) == 0 {
		t.Error("no original headers")
	}
}

// TestFailureCorpusDetails ensures the fields particular to one sample:
// header order and RFC 2047 decoding (domain.de), DKIM-Domain and
// Identity-Alignment (NetEase).
func TestFailureCorpusDetails(t *testing.T) {
	de := mustExtractFailureFile(t, "DMARC Failure Report for domain.de (mail-from=sharepoint@domain.de, ip=10.10.10.10).eml")[0]
	var names []string
	for _, h := range de.Headers {
		names = append(names, h.Name)
	}
	wantNames := []string{"Received", "Date", "Message-ID", "To", "from", "Subject", "MIME-Version", "X-Mailer",
		"Content-Type", "Content-Transfer-Encoding"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("header names %q, want %q", names, wantNames)
	}
	if got, want := de.Headers[4].Value, `"Interaktive Wettbewerber-Übersicht" <sharepoint@domain.de>`; got != want {
		t.Errorf("decoded From %q, want %q", got, want)
	}
	if got := de.Headers[0].Value; !strings.HasPrefix(got, "from Servernameone.domain.local") || strings.ContainsAny(got, "\r\n\t") {
		t.Errorf("unfolded Received %q", got)
	}
	if de.UserAgent != "Lua/1.0" {
		t.Errorf("UserAgent %q", de.UserAgent)
	}

	ne := mustExtractFailureFile(t, "[Netease DMARC Failure Report] Rent Reminder.eml")[0]
	if ne.DKIMDomain != "entrata.com" || ne.IdentityAlignment != "spf,dkim" || ne.UserAgent != "NtesDmarcReporter/1.0" {
		t.Errorf("DKIMDomain %q, IdentityAlignment %q, UserAgent %q", ne.DKIMDomain, ne.IdentityAlignment, ne.UserAgent)
	}
	if ne.OriginalRcptTo != nil {
		t.Errorf("OriginalRcptTo %q, want none", ne.OriginalRcptTo)
	}
}

// TestFailureCorpusCRLF ensures the LF and CR LF copies of the LinkedIn
// sample give identical reports.
func TestFailureCorpusCRLF(t *testing.T) {
	lf := mustExtractFailureFile(t, "dmarc_ruf_report_linkedin.eml")
	crlf := mustExtractFailureFile(t, "dmarc_ruf_report_linkedin.crlf.eml")
	if !reflect.DeepEqual(lf, crlf) {
		a, _ := json.Marshal(lf)
		b, _ := json.Marshal(crlf)
		t.Errorf("LF and CR LF differ:\n%s\n%s", a, b)
	}
}
