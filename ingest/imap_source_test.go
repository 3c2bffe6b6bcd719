package ingest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/internal/mailtest"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

func imapOf(orgID string) Arrival {
	return Arrival{Source: SourceIMAP, OrgID: orgID, Name: "imap <m@test>"}
}

// A mailbox's mail routes within its organization only; ordinary mail is
// left alone (NotReport), report-like mail that will not parse is
// quarantined under the organization.
func TestIMAPSource(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	other := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	storetest.MustDomain(t, e.db, other.ID, "other.test")

	var xml bytes.Buffer
	if _, err := reportgen.WriteReport(&xml, 1, 3, reportgen.Options{}); err != nil {
		t.Fatal(err)
	}
	res := e.ingest(t, xml.Bytes(), imapOf(e.org.ID))
	if len(res.Reports) != 1 || res.Reports[0].Duplicate || res.NotReport || res.Quarantined != "" {
		t.Fatalf("report: %+v", res)
	}
	if res := e.ingest(t, xml.Bytes(), imapOf(e.org.ID)); len(res.Reports) != 1 || !res.Reports[0].Duplicate {
		t.Errorf("again: %+v, want a duplicate", res)
	}

	plain := []byte("From: a@b.test\r\nTo: dmarc@example.com\r\nSubject: lunch?\r\n\r\nAre you free?\r\n")
	multi := []byte("From: a@b.test\r\nSubject: doc\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n" +
		mailtest.Multipart("b", "Content-Type: text/plain\r\n\r\nsee attached",
			"Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64([]byte("%PDF-1.4 not a report"))))
	for name, raw := range map[string][]byte{"plain": plain, "attachment": multi} {
		res := e.ingest(t, raw, imapOf(e.org.ID))
		if !res.NotReport || res.Quarantined != "" || len(res.Reports) != 0 {
			t.Errorf("%s mail: %+v, want NotReport", name, res)
		}
	}
	if q := len(quarantined(t, e.db)); q != 0 {
		t.Fatalf("ordinary mail quarantined: %d entries", q)
	}

	// The same ordinary mail by SMTP or import is still quarantined.
	if res := e.ingest(t, plain, importOf("x")); res.NotReport || res.Quarantined == "" {
		t.Errorf("import of ordinary mail: %+v, want quarantined", res)
	}

	broken := []byte("From: a@b.test\r\nSubject: Report domain: example.com\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n" +
		mailtest.Multipart("b", "Content-Type: text/plain\r\n\r\nreport",
			"Content-Type: application/gzip; name=r.xml.gz\r\nContent-Transfer-Encoding: base64\r\n\r\n"+mailtest.Base64([]byte("\x1f\x8b\x08\x00garbage that is no deflate stream"))))
	res = e.ingest(t, broken, imapOf(e.org.ID))
	if res.NotReport || res.Quarantined == "" {
		t.Fatalf("broken report: %+v, want quarantined", res)
	}

	// A report for another organization's domain is not stored there.
	var foreign bytes.Buffer
	if _, err := reportgen.WriteReport(&foreign, 2, 3, reportgen.Options{Domain: "other.test"}); err != nil {
		t.Fatal(err)
	}
	res = e.ingest(t, foreign.Bytes(), imapOf(e.org.ID))
	if res.Quarantined == "" || len(res.Reports) != 0 || !strings.Contains(res.Reason, "no registered domain for other.test") {
		t.Errorf("foreign report: %+v, want quarantined", res)
	}
	if reps, n, err := e.db.ListReports(other.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}}); err != nil || n != 0 {
		t.Errorf("other org got %d reports (%v, %v)", n, reps, err)
	}
	for _, q := range quarantined(t, e.db) {
		if q.Source == "imap" && q.OrgID != e.org.ID {
			t.Errorf("quarantine entry %+v not in the mailbox's organization", q)
		}
	}
}

func TestIMAPSourceNeedsOrg(t *testing.T) {
	e := newEnv(t, nil)
	for _, d := range []Arrival{{Source: SourceIMAP}, {Source: SourceIMAP, OrgID: "not-an-id"}} {
		if _, err := e.p.Ingest(context.Background(), strings.NewReader("x"), d); err == nil {
			t.Errorf("%+v: no error", d)
		}
	}
	if n := len(quarantined(t, e.db)); n != 0 {
		t.Errorf("%d quarantined", n)
	}
}

func quarantined(t *testing.T, db *store.DB) []*store.QuarantineEntry {
	t.Helper()
	q, _, err := db.ListQuarantine(store.Page{Page: 1, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return q
}
