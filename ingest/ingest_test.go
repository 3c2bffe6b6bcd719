package ingest

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/aggregate"
	"github.com/dmarcd/dmarcd/dmarc/container"
	"github.com/dmarcd/dmarcd/internal/reportgen"
	"github.com/dmarcd/dmarcd/metrics"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/store/storetest"
)

// corpusFile is an aggregate file of testdata/corpus with the counts its
// README lists (records, sum of count) and its policy domain.
type corpusFile struct {
	path            string
	domain          string
	records         int
	messages        int64
	orgName, report string
}

var corpusFiles = []corpusFile{
	{"_removed_from_head/aggregate/zoho.com!example.com!1581753600!1581840000.xml", "example.com", 8, 9, "zoho.com", "e2cb5d97-dcbb-470f-b2dd-45519a2abbb3"},
	{"aggregate/!example.com!1538204542!1538463818.xml", "example.com", 1, 1, "", "example.com:1538463741"},
	{"aggregate/!large-example.com!1711897200!1711983600.xml", "example.com", 2286, 2286, "", "example.com:1711897200"},
	{"aggregate/Report domain- borschow.com Submitter- google.com Report-ID- 949348866075514174.eml", "borschow.com", 1, 1, "google.com", "949348866075514174"},
	{"aggregate/addisonfoods.com!example.com!1536105600!1536191999.xml", "example.com", 1, 1, "addisonfoods.com", "3ceb5548498640beaeb47327e202b0b9"},
	{"aggregate/empty_reason.xml", "example.com", 1, 2, "example.org", "20240125141224705995"},
	{"aggregate/estadocuenta1.infonacot.gob.mx!example.com!1536853302!1536939702!2940.xml.zip", "example.com", 1, 1, "XYZ Corporation", "2940"},
	{"aggregate/example.net!example.com!1529366400!1529452799.xml", "example.com", 1, 1, "example.net", "b043f0e264cf4ea995e93765242f6dfb"},
	{"aggregate/fastmail.com!example.com!1516060800!1516147199!102675056.xml.gz", "indemed.com", 1, 1, "FastMail Pty Ltd", "102675056"},
	// The README has no message count for the three files Python cannot
	// parse; each has one record of count 1.
	{"aggregate/ikea.com!example.de!1538690400!1538776800.xml", "example.de", 1, 1, "ikea.com", "aggr_report_2018_10_05_5bc7e9b4f3e8a"},
	{"aggregate/invalid_utf_8.xml", "example.com", 1, 1, "", "example.com:1538463741"},
	{"aggregate/invalid_xml.xml", "example.com", 1, 1, "veeam.com", "sonexushealth.com:1530233361"},
	{"aggregate/mimecast-weird-gzip.eml", "ab.id.au", 1, 1, "Mimecast", "157a5fe30ec76f4bc0d8bccfc96c118a167a1280fee7c7465af5115e73082e5e"},
	{"aggregate/old_draft_from_wiki.xml", "example.com", 1, 2, "acme.com", "9391651994964116463"},
	{"aggregate/protection.outlook.com!example.com!1711756800!1711843200.xml", "example.com", 1, 1, "Outlook.com", "cfeafefe4129445e8c81018bd9177197"},
	{"aggregate/rfc9990-example.net!example.com!1700000000!1700086399.xml", "example.com", 2, 7, "example.net", "dmarcbis-test-report-001"},
	{"aggregate/rfc9990-sample.xml", "example.com", 1, 123, "Sample Reporter", "3v98abbp8ya9n3va8yr8oa3ya"},
	{"aggregate/twilight.eml", "twlnet.com", 1, 1, "google.com", "1627703331531660819"},
	{"aggregate/usssa.com!example.com!1538784000!1538870399.xml", "example.com", 2, 2, "usssa.com", "8953b4d4a4ee4218b6ac0e2cb2667ee1"},
	{"aggregate/veeam.com!example.com!1530133200!1530219600.xml", "example.com", 1, 1, "veeam.com", "sonexushealth.com:1530233361"},
	{"aggregate_invalid/report_with_upper_cased_pass.xml", "example.com", 1, 1, "example.com", "aggr_report_example.com_20191202_1638"},
	{"extract_report/changed-input.xml", "example.com", 20, 3047, "fred.com", "11038226378739404135"},
	{"extract_report/nice-input.xml", "example.com", 20, 3047, "google.com", "11038226378739404135"},
	{"extract_report/nice-input.xml.gz", "example.com", 20, 3047, "google.com", "11038226378739404135"},
	{"extract_report/nice-input.xml.zip", "example.com", 20, 3047, "google.com", "11038226378739404135"},
}

var corpusDomains = []string{"example.com", "indemed.com", "borschow.com", "twlnet.com", "ab.id.au", "example.de"}

func corpusPath(rel string) string {
	return filepath.Join("..", "testdata", "corpus", filepath.FromSlash(rel))
}

// TestCorpus ensures every aggregate file of the corpus is stored, routed
// to its policy domain, with the record and message counts its README
// lists, in the report, its records and its statistics.
func TestCorpus(t *testing.T) {
	for _, f := range corpusFiles {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			e := newEnv(t, nil)
			doms := map[string]*store.Domain{}
			for _, name := range corpusDomains {
				doms[name] = e.domain(t, name)
			}
			res := e.ingest(t, mustReadFile(t, corpusPath(f.path)), importOf(f.path))
			if res.Quarantined != "" || len(res.Reports) != 1 || res.Reports[0].Duplicate {
				t.Fatalf("result %+v, want one stored report", res)
			}
			out := res.Reports[0]
			if out.Records != f.records || out.Domain != f.domain {
				t.Errorf("outcome %+v, want %d records for %s", out, f.records, f.domain)
			}
			rep, err := e.db.FindReport(e.org.ID, out.ReportID)
			if err != nil {
				t.Fatal(err)
			}
			if rep.DomainID != doms[f.domain].ID || rep.RecordCount != f.records || rep.MessageCount != f.messages ||
				rep.OrgName != f.orgName || rep.ExternalReportID != f.report {
				t.Errorf("report %+v, want %d records, %d messages, org %q, id %q", rep, f.records, f.messages, f.orgName, f.report)
			}
			recs := allRecords(t, e.db, e.org.ID, rep.ID)
			msgs, pass := sumCounts(recs)
			if len(recs) != f.records || msgs != f.messages {
				t.Errorf("records: %d with %d messages, want %d with %d", len(recs), msgs, f.records, f.messages)
			}
			st, err := e.db.ReportStatistics(e.org.ID, rep.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.MessageCount != msgs || st.DMARC.Pass != pass || st.DMARC.Pass+st.DMARC.Fail != msgs ||
				rep.DMARCPassCount != pass {
				t.Errorf("statistics %+v, want %d messages, %d passing", st.Summary, msgs, pass)
			}
			d, err := e.db.FindDomain(e.org.ID, rep.DomainID)
			if err != nil {
				t.Fatal(err)
			}
			if d.LastReportAt == nil || !d.LastReportAt.Equal(storetest.Epoch()) {
				t.Errorf("last_report_at %v, want %v", d.LastReportAt, storetest.Epoch())
			}
		})
	}
}

// TestCorpusTogether ensures the corpus ingested into one store keeps one
// copy of each report: the three encodings of nice-input and the two pairs
// of files that carry the same report (same org_name, id and domain).
func TestCorpusTogether(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range corpusDomains {
		e.domain(t, name)
	}
	stored, dups := 0, 0
	for _, f := range corpusFiles {
		res := e.ingest(t, mustReadFile(t, corpusPath(f.path)), importOf(f.path))
		for _, o := range res.Reports {
			if o.Duplicate {
				dups++
			} else {
				stored++
			}
		}
	}
	if stored != 21 || dups != 4 {
		t.Errorf("stored %d, duplicates %d; want 21 and 4", stored, dups)
	}
	_, total, err := e.db.ListReports(e.org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 100}})
	if err != nil || total != 21 {
		t.Errorf("ListReports: total %d, %v; want 21", total, err)
	}
}

// TestNoReportIsQuarantined ensures inputs holding no DMARC report at all
// (an empty file, an ordinary mail, an HTML mail) are kept in quarantine
// with their bytes and the reason, never dropped. Failure reports are
// reports: their own tests are in failure_test.go.
func TestNoReportIsQuarantined(t *testing.T) {
	inputs := map[string][]byte{
		corpusPath("empty.xml"): mustReadFile(t, corpusPath("empty.xml")),
		"plain.eml":             []byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: hello\r\n\r\nNo report here.\r\n"),
		"html.eml": []byte("From: a@example.com\r\nTo: b@example.com\r\nSubject: DMARC question\r\n" +
			"MIME-Version: 1.0\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<html><body><p>What is DMARC?</p></body></html>\r\n"),
	}
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	for path, data := range inputs {
		res := e.ingest(t, data, importOf(path))
		if res.Quarantined == "" || len(res.Reports) != 0 || !strings.Contains(res.Reason, "no DMARC or TLS report") {
			t.Fatalf("%s: result %+v, want quarantined for having no report", path, res)
		}
		entry, raw, err := e.db.FindQuarantine(res.Quarantined)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, data) || entry.Size != int64(len(data)) || entry.Source != "import" || entry.Name != path {
			t.Errorf("%s: entry %+v with %d bytes, want the %d input bytes", path, entry, len(raw), len(data))
		}
	}
}

// TestGeolocation ensures each record is geolocated from the test
// databases (81.2.69.142 is London, GB; 89.160.20.112 is AS29518 in
// Sweden), the summary groups by country and ASN agree with the records,
// and records have geo null without a database.
func TestGeolocation(t *testing.T) {
	xml := reportgen.Generate(7, 400, reportgen.Options{})
	t.Run("with database", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Geo = openGeo(t) })
		e.domain(t, "example.com")
		res := e.ingest(t, xml, importOf("geo.xml"))
		id := res.Reports[0].ReportID
		byCountry := map[string]int64{}
		seen := map[string]bool{}
		for _, r := range allRecords(t, e.db, e.org.ID, id) {
			if r.Geo == nil {
				t.Fatalf("record %s has no geo object", r.SourceIP)
			}
			if r.Geo.CountryCode != nil {
				byCountry[*r.Geo.CountryCode] += r.Count
			}
			switch r.SourceIP {
			case "81.2.69.142":
				seen[r.SourceIP] = true
				if strOf(r.Geo.City) != "London" || strOf(r.Geo.CountryCode) != "GB" || r.Geo.Latitude == nil {
					t.Errorf("81.2.69.142: %+v, want London, GB", r.Geo)
				}
			case "89.160.20.112":
				seen[r.SourceIP] = true
				if r.Geo.ASN == nil || *r.Geo.ASN != 29518 || strOf(r.Geo.ASOrg) != "Bredband2 AB" || strOf(r.Geo.CountryCode) != "SE" {
					t.Errorf("89.160.20.112: %+v, want AS29518 Bredband2 AB, SE", r.Geo)
				}
			case "209.85.0.1":
				if r.Geo.CountryCode != nil {
					t.Errorf("unknown address located: %+v", r.Geo)
				}
			}
		}
		if !seen["81.2.69.142"] || !seen["89.160.20.112"] {
			t.Fatalf("the report lacks the test addresses: %v", seen)
		}
		st, err := e.db.ReportStatistics(e.org.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range st.ByCountry {
			if g.CountryCode != nil && g.Messages != byCountry[*g.CountryCode] {
				t.Errorf("by_country %s: %d messages, records say %d", *g.CountryCode, g.Messages, byCountry[*g.CountryCode])
			}
		}
		unknown := 0
		for _, g := range st.ByCountry {
			if g.CountryCode == nil {
				unknown++
			}
		}
		if len(st.ByCountry) != len(byCountry)+1 || unknown != 1 {
			t.Errorf("by_country %+v: want %d countries and one unknown group", st.ByCountry, len(byCountry))
		}
	})
	t.Run("without database", func(t *testing.T) {
		e := newEnv(t, nil)
		e.domain(t, "example.com")
		res := e.ingest(t, xml, importOf("geo.xml"))
		for _, r := range allRecords(t, e.db, e.org.ID, res.Reports[0].ReportID) {
			if r.Geo != nil {
				t.Fatalf("record %s: geo %+v without a database", r.SourceIP, r.Geo)
			}
		}
	})
}

func strOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestDuplicate ensures the same report ingested twice, also in another
// container, is stored once, and that the second result names the first.
func TestDuplicate(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	xml := reportgen.Generate(1, 30, reportgen.Options{})
	first := e.ingest(t, xml, importOf("a.xml"))
	second := e.ingest(t, reportgen.Gzip(xml), importOf("a.xml.gz"))
	if len(second.Reports) != 1 || !second.Reports[0].Duplicate || second.Reports[0].ReportID != first.Reports[0].ReportID ||
		second.Reports[0].Records != 30 {
		t.Fatalf("second ingest %+v, want a duplicate of %s", second, first.Reports[0].ReportID)
	}
	// Another reporter with the same report id is another report.
	other := e.ingest(t, reportgen.Generate(1, 30, reportgen.Options{OrgName: "yahoo.com"}), importOf("b.xml"))
	if other.Reports[0].Duplicate {
		t.Errorf("a report of another org_name was taken for a duplicate")
	}
	if n := countKeys(t, e.db, "reports"); n != 2 {
		t.Errorf("%d reports stored, want 2", n)
	}
	if n, orphans := storedRecords(t, e.db); n != 60 || orphans != 0 {
		t.Errorf("%d records stored (%d orphan blocks), want 60", n, orphans)
	}
}

// TestSMTPRouting ensures a report mailed to a domain's reporting address
// is stored under that domain when its policy domain is the domain or a
// subdomain, and quarantined, with a reason naming both, otherwise.
func TestSMTPRouting(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	other := e.domain(t, "unrelated.org")
	for i, name := range []string{"example.com", "mail.example.com"} {
		res := e.ingest(t, reportgen.Generate(int64(i), 5, reportgen.Options{Domain: name}), smtpTo(strings.ToUpper(dom.ReportingEmail)))
		if len(res.Reports) != 1 || res.Reports[0].Domain != "example.com" {
			t.Fatalf("report for %s: %+v, want stored under example.com", name, res)
		}
		rep, _ := e.db.FindReport(e.org.ID, res.Reports[0].ReportID)
		if rep.DomainID != dom.ID || rep.PolicyPublished.Domain != name {
			t.Errorf("report for %s: domain %s, policy %s", name, rep.DomainID, rep.PolicyPublished.Domain)
		}
	}
	data := reportgen.Generate(4, 5, reportgen.Options{Domain: "unrelated.org"})
	res := e.ingest(t, data, smtpTo(dom.ReportingEmail))
	if res.Quarantined == "" || !strings.Contains(res.Reason, "unrelated.org") || !strings.Contains(res.Reason, "example.com") {
		t.Fatalf("report for an unrelated domain: %+v, want quarantined saying so", res)
	}
	entry, raw, err := e.db.FindQuarantine(res.Quarantined)
	if err != nil || !bytes.Equal(raw, data) || entry.OrgID != e.org.ID || entry.Recipient != dom.ReportingEmail {
		t.Errorf("quarantine entry %+v, %v", entry, err)
	}
	if d, _ := e.db.FindDomain(e.org.ID, other.ID); d.LastReportAt != nil {
		t.Errorf("the unrelated domain got a report")
	}
	res = e.ingest(t, data, smtpTo("nobody@reports.test"))
	if res.Quarantined == "" || !strings.Contains(res.Reason, "nobody@reports.test") {
		t.Errorf("unknown recipient: %+v", res)
	}
}

// TestImportRouting ensures import finds the domain by the policy domain,
// then its organizational domain, within the organization given, reports
// an ambiguity between organizations as an error storing nothing, and
// quarantines a report for an unregistered domain.
func TestImportRouting(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	org2 := storetest.MustOrganization(t, e.db, "other", store.PlanUnlimited)
	dom2 := storetest.MustDomain(t, e.db, org2.ID, "example.com")
	sub := reportgen.Generate(5, 5, reportgen.Options{Domain: "news.example.com"})

	_, err := e.p.Ingest(context.Background(), bytes.NewReader(sub), importOf("sub.xml"))
	if !errors.Is(err, ErrAmbiguous) {
		t.Fatalf("ambiguous import: %v, want ErrAmbiguous", err)
	}
	if n := countKeys(t, e.db, "reports") + countKeys(t, e.db, "quarantine"); n != 0 {
		t.Fatalf("an ambiguous import stored or quarantined something (%d)", n)
	}
	for _, want := range []*store.Domain{dom, dom2} {
		d := importOf("sub.xml")
		d.OrgID = want.OrgID
		res := e.ingest(t, sub, d)
		if len(res.Reports) != 1 {
			t.Fatalf("import into org %s: %+v", want.OrgID, res)
		}
		rep, err := e.db.FindReport(want.OrgID, res.Reports[0].ReportID)
		if err != nil || rep.DomainID != want.ID {
			t.Errorf("report %+v, %v: want domain %s", rep, err, want.ID)
		}
	}
	res := e.ingest(t, reportgen.Generate(6, 5, reportgen.Options{Domain: "nowhere.net"}), importOf("n.xml"))
	if res.Quarantined == "" || res.Reason != "no registered domain for nowhere.net" {
		t.Errorf("unregistered domain: %+v", res)
	}
}

// TestImportOfUnregistrableDomain ensures an import of a report for a name
// that can never be registered (.localhost, an underscore) is quarantined
// with a reason that says so and why, not only "no registered domain"
// (issue 24 item 19); a registrable name keeps the plain reason.
func TestImportOfUnregistrableDomain(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	for i, c := range []struct{ domain, want string }{
		{"a-domain.localhost", "no registered domain for a-domain.localhost, and it can never be registered: .localhost is reserved"},
		{"_bad.example.org", `no registered domain for _bad.example.org, and it can never be registered: the label "_bad" contains an underscore`},
		{"nowhere.example", "no registered domain for nowhere.example"},
	} {
		res := e.ingest(t, reportgen.Generate(int64(40+i), 3, reportgen.Options{Domain: c.domain}), importOf(c.domain+".xml"))
		if res.Quarantined == "" || !strings.HasPrefix(res.Reason, c.want) {
			t.Errorf("%s: quarantined %q, reason %q; want %q", c.domain, res.Quarantined, res.Reason, c.want)
		}
		if c.domain == "nowhere.example" && strings.Contains(res.Reason, "never") {
			t.Errorf("%s: %q", c.domain, res.Reason)
		}
	}
}

// TestBrokenInput ensures a report that cannot be read is not stored, even
// in part, and its input is quarantined with the parser's reason, while a
// broken part next to a good one costs only itself.
func TestBrokenInput(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BatchRecords = 100 })
	e.domain(t, "example.com")
	xml := reportgen.Generate(8, 450, reportgen.Options{})
	cut := xml[:len(xml)*3/4]
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", cut, "malformed"},
		{"truncated gzip", reportgen.Gzip(cut), "malformed"},
		{"corrupt gzip", reportgen.Gzip(xml)[:200], "malformed"},
		{"doctype", []byte(`<?xml version="1.0"?><!DOCTYPE feedback [<!ENTITY a "b">]><feedback><report_metadata>&a;</report_metadata></feedback>`), "malformed"},
		{"mail without report", []byte("From: a@example.net\r\nTo: b@example.com\r\nSubject: hello\r\n\r\nJust text.\r\n"), "no DMARC or TLS report"},
		{"not xml", []byte("hello world"), "no DMARC or TLS report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.ingest(t, tc.data, importOf(tc.name))
			if res.Quarantined == "" || len(res.Reports) != 0 || !strings.Contains(res.Reason, tc.want) {
				t.Fatalf("result %+v, want quarantined (%s)", res, tc.want)
			}
			_, raw, err := e.db.FindQuarantine(res.Quarantined)
			if err != nil || !bytes.Equal(raw, tc.data) {
				t.Errorf("kept %d bytes (%v), want the %d of the input", len(raw), err, len(tc.data))
			}
		})
	}
	for _, b := range reportBuckets {
		if n := countKeys(t, e.db, b); n != 0 {
			t.Errorf("bucket %s has %d keys after broken inputs", b, n)
		}
	}
	t.Run("good and broken members", func(t *testing.T) {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for i, member := range [][]byte{xml, cut} {
			w, _ := zw.Create([]string{"good.xml", "cut.xml"}[i])
			w.Write(member)
		}
		zw.Close()
		res := e.ingest(t, buf.Bytes(), importOf("mixed.zip"))
		if res.Quarantined != "" || len(res.Reports) != 1 || res.Reports[0].Records != 450 ||
			len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "cut.xml") {
			t.Fatalf("result %+v, want the good report and one problem", res)
		}
		if n, orphans := storedRecords(t, e.db); n != 450 || orphans != 0 {
			t.Errorf("%d records stored (%d orphan blocks), want 450", n, orphans)
		}
		if n := countKeys(t, e.db, "reports_pending"); n != 0 {
			t.Errorf("%d pending reports left", n)
		}
	})
}

// TestQuarantineReasonsSayItOnce ensures the reason a quarantine entry
// keeps reads as one statement for a person: no package prefix ("dmarc:")
// at its start or after a member's name, and "no report" said once, not
// as "no aggregate report in the input: no DMARC report found".
func TestQuarantineReasonsSayItOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	xml := reportgen.Generate(8, 20, reportgen.Options{})
	cut := xml[:len(xml)*3/4]
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("cut.xml")
	w.Write(cut)
	zw.Close()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"README.md", []byte("# My reports\n"), "no DMARC or TLS report in the input"},
		{"plain.eml", []byte("From: a@example.net\r\nTo: b@example.com\r\nSubject: hello\r\n\r\nJust text.\r\n"), "no DMARC or TLS report in the input"},
		{"empty.xml", []byte(`<?xml version="1.0"?><other/>`), "no DMARC or TLS report in the input"},
		{"cut.zip", zbuf.Bytes(), "cut.xml: report cut short"},
		{"cut.xml.gz", reportgen.Gzip(cut), "report cut short"},
	} {
		res := e.ingest(t, tc.data, importOf(tc.name))
		if res.Quarantined == "" {
			t.Errorf("%s: not quarantined: %+v", tc.name, res)
			continue
		}
		if !strings.Contains(res.Reason, tc.want) || strings.Contains(res.Reason, "dmarc: ") ||
			strings.Count(strings.ToLower(res.Reason), "report found")+strings.Count(res.Reason, "report in the input") > 1 {
			t.Errorf("%s: reason %q, want %q said once without a package prefix", tc.name, res.Reason, tc.want)
		}
	}
}

// cutReader returns its data, then an error instead of EOF.
type cutReader struct {
	r   io.Reader
	err error
}

func (f *cutReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// TestInputFails ensures an input whose reader fails (a dropped SMTP
// connection) gives an error with nothing stored or quarantined, also when
// a large report had records committed already.
func TestInputFails(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BatchRecords = 50 })
	e.domain(t, "example.com")
	boom := errors.New("connection reset")
	xml := reportgen.Generate(9, 400, reportgen.Options{})
	for _, data := range [][]byte{xml[:len(xml)/2], xml[:100]} {
		r := &cutReader{r: bytes.NewReader(data), err: boom}
		res, err := e.p.Ingest(context.Background(), r, smtpTo("x@reports.test"))
		if !errors.Is(err, boom) || res != nil {
			t.Fatalf("Ingest: %+v, %v; want the reader's error", res, err)
		}
	}
	for _, b := range append(reportBuckets, "quarantine") {
		if n := countKeys(t, e.db, b); n != 0 {
			t.Errorf("bucket %s has %d keys after failed inputs", b, n)
		}
	}
}

// TestLargeReport ensures a report larger than a batch is written in
// chunks and stored whole: every record in order, summary sums equal to
// the record sums, nothing left pending.
func TestLargeReport(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BatchRecords = 1000 })
	dom := e.domain(t, "example.com")
	xml := reportgen.Generate(10, 5500, reportgen.Options{})
	want, _ := parseAll(t, xml)
	commits := e.p.commits.Load()
	res := e.ingest(t, xml, importOf("large.xml"))
	if got := e.p.commits.Load() - commits; got < 6 {
		t.Errorf("%d commits for 5500 records in batches of 1000, want at least 6", got)
	}
	recs := allRecords(t, e.db, e.org.ID, res.Reports[0].ReportID)
	if len(recs) != len(want) {
		t.Fatalf("%d records stored, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if r.SourceIP != want[i].SourceIP.String() || r.Count != want[i].Count {
			t.Fatalf("record %d: %s x%d, want %s x%d", i, r.SourceIP, r.Count, want[i].SourceIP, want[i].Count)
		}
	}
	st, _ := e.db.ReportStatistics(e.org.ID, res.Reports[0].ReportID)
	checkSummary(t, st.Summary, recs)
	if n := countKeys(t, e.db, "reports_pending"); n != 0 {
		t.Errorf("%d pending markers left", n)
	}
	ds, err := e.db.DomainStatistics(e.org.ID, dom.ID, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 12, 31, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, ds.Summary, recs)
}

func parseAll(t *testing.T, xml []byte) ([]aggregate.Record, *aggregate.Header) {
	t.Helper()
	h, recs, err := aggregate.Parse(bytes.NewReader(xml), container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return recs, h
}

// checkSummary compares a summary with sums computed from the records.
func checkSummary(t *testing.T, s store.Summary, recs []*store.Record) {
	t.Helper()
	var want store.Summary
	auth := map[[3]string]int64{}
	for _, r := range recs {
		want.MessageCount += r.Count
		add := func(c *store.AuthCount, ok bool) {
			if ok {
				c.Pass += r.Count
			} else {
				c.Fail += r.Count
			}
		}
		add(&want.DKIM, r.DKIM == "pass")
		add(&want.SPF, r.SPF == "pass")
		if r.DMARC == "pass" {
			want.DMARC.Pass += r.Count
		} else {
			want.DMARC.Fail += r.Count
		}
		switch r.Disposition {
		case "quarantine":
			want.Disposition.Quarantine += r.Count
		case "reject":
			want.Disposition.Reject += r.Count
		default:
			want.Disposition.None += r.Count
		}
		auth[[3]string{string(r.DKIM), string(r.SPF), r.DMARC}] += r.Count
	}
	if s.MessageCount != want.MessageCount || s.DMARC.Pass != want.DMARC.Pass || s.DMARC.Fail != want.DMARC.Fail ||
		s.DKIM != want.DKIM || s.SPF != want.SPF || s.Disposition != want.Disposition {
		t.Errorf("summary %+v\nrecords say %+v", s, want)
	}
	var groups int64
	for i, g := range s.ByAuthResult {
		groups += g.Messages
		if g.Messages != auth[[3]string{g.DKIM, g.SPF, g.DMARC}] {
			t.Errorf("by_auth_result %+v: records say %d", g, auth[[3]string{g.DKIM, g.SPF, g.DMARC}])
		}
		if i > 0 && g.Messages > s.ByAuthResult[i-1].Messages {
			t.Errorf("by_auth_result not ordered by messages: %+v", s.ByAuthResult)
		}
	}
	if groups != want.MessageCount {
		t.Errorf("by_auth_result sums to %d, want %d", groups, want.MessageCount)
	}
}

// TestConcurrentIngest ensures Ingest calls from 8 goroutines are committed
// in groups (fewer commits than reports) and every report is stored.
func TestConcurrentIngest(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	const workers, each = 8, 25
	commits := e.p.commits.Load()
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				seed := int64(w*each + i)
				_, err := e.p.Ingest(context.Background(), bytes.NewReader(reportgen.Generate(seed, 5, reportgen.Options{})), importOf("c.xml"))
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := e.p.commits.Load() - commits
	if n := countKeys(t, e.db, "reports"); n != workers*each {
		t.Fatalf("%d reports stored, want %d", n, workers*each)
	}
	if got >= workers*each {
		t.Errorf("%d commits for %d reports: not grouped", got, workers*each)
	}
	t.Logf("%d reports in %d commits", workers*each, got)
}

// TestDomainStatistics ensures a domain's statistics come from the daily
// roll-ups: every day of the range with zeros, reports counted on the day
// of their date_begin, sums equal to the records, top sources ordered.
func TestDomainStatistics(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	var all []*store.Record
	perDay := map[int]int64{}
	for i, d := range []int{3, 3, 5} {
		res := e.ingest(t, reportgen.Generate(int64(20+i), 40, reportgen.Options{Begin: day(d)}), importOf("s.xml"))
		recs := allRecords(t, e.db, e.org.ID, res.Reports[0].ReportID)
		all = append(all, recs...)
		m, _ := sumCounts(recs)
		perDay[d] += m
	}
	st, err := e.db.DomainStatistics(e.org.ID, dom.ID, day(2).Add(13*time.Hour), day(6))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ByDay) != 5 || st.ByDay[0].Date != "2026-11-02" || st.ByDay[4].Date != "2026-11-06" {
		t.Fatalf("by_day %+v, want 2026-11-02..06", st.ByDay)
	}
	for i, d := range st.ByDay {
		n := 2 + i
		wantReports := map[int]int{3: 2, 5: 1}[n]
		if d.Messages != perDay[n] || d.Reports != wantReports || d.DMARCPass+d.DMARCFail != d.Messages {
			t.Errorf("day %s: %+v, want %d messages in %d reports", d.Date, d, perDay[n], wantReports)
		}
	}
	if st.ReportCount != 3 || !st.DateFrom.Equal(day(2)) || !st.DateTo.Equal(day(6)) {
		t.Errorf("report_count %d, range %v..%v", st.ReportCount, st.DateFrom, st.DateTo)
	}
	checkSummary(t, st.Summary, all)
	bySource := map[string]int64{}
	for _, r := range all {
		bySource[r.SourceIP] += r.Count
	}
	if len(st.TopSources) != min(20, len(bySource)) {
		t.Errorf("%d top sources of %d", len(st.TopSources), len(bySource))
	}
	for i, s := range st.TopSources {
		if s.Messages != bySource[s.SourceIP] || i > 0 && s.Messages > st.TopSources[i-1].Messages {
			t.Errorf("top source %d %+v: records say %d", i, s, bySource[s.SourceIP])
		}
	}
	st, err = e.db.DomainStatistics(e.org.ID, dom.ID, day(10), day(12))
	if err != nil || st.MessageCount != 0 || len(st.ByDay) != 3 || st.ByDay[1].Messages != 0 || len(st.TopSources) != 0 {
		t.Errorf("empty range: %+v, %v", st, err)
	}
}

// TestDeleteDomainCascade ensures deleting a domain removes its reports,
// records, roll-ups and dedup entries, and leaves other domains' alone.
func TestDeleteDomainCascade(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.BatchRecords = 30 })
	dom := e.domain(t, "example.com")
	keep := e.domain(t, "example.org")
	xml := reportgen.Generate(30, 100, reportgen.Options{})
	e.ingest(t, xml, importOf("a.xml"))
	e.ingest(t, reportgen.Generate(31, 10, reportgen.Options{Domain: "example.org"}), importOf("b.xml"))
	if err := e.db.DeleteDomain(e.org.ID, dom.ID); err != nil {
		t.Fatal(err)
	}
	for b, want := range map[string]int{"reports": 1, "reports_by_domain": 1, "report_rollups": 1} {
		if n := countKeys(t, e.db, b); n != want {
			t.Errorf("bucket %s: %d keys after the delete, want %d", b, n, want)
		}
	}
	if n, orphans := storedRecords(t, e.db); n != 10 || orphans != 0 {
		t.Errorf("%d records (%d orphan blocks) after the delete, want 10", n, orphans)
	}
	if _, total, _ := e.db.ListReports(e.org.ID, store.ReportFilter{DomainID: keep.ID, Page: store.Page{Page: 1, Limit: 10}}); total != 1 {
		t.Errorf("the other domain has %d reports, want 1", total)
	}
	// Registered again, the domain gets the same report anew.
	e.domain(t, "example.com")
	if res := e.ingest(t, xml, importOf("a.xml")); res.Reports[0].Duplicate {
		t.Errorf("report of a deleted domain taken for a duplicate")
	}
}

// TestRetryQuarantine ensures a retry that still fails keeps one entry with
// one more retry, and one that succeeds stores the report and deletes it.
func TestRetryQuarantine(t *testing.T) {
	e := newEnv(t, nil)
	data := reportgen.Generate(40, 12, reportgen.Options{Domain: "late.example"})
	res := e.ingest(t, data, importOf("late.xml"))
	id := res.Quarantined
	if id == "" {
		t.Fatalf("not quarantined: %+v", res)
	}
	again, err := e.p.RetryQuarantine(context.Background(), id)
	if err != nil || again.Quarantined != id {
		t.Fatalf("retry: %+v, %v; want the same entry", again, err)
	}
	entry, _, _ := e.db.FindQuarantine(id)
	if entry.Retries != 1 {
		t.Errorf("retries %d, want 1", entry.Retries)
	}
	e.domain(t, "late.example")
	done, err := e.p.RetryQuarantine(context.Background(), id)
	if err != nil || done.Quarantined != "" || len(done.Reports) != 1 || done.Reports[0].Records != 12 {
		t.Fatalf("retry after registering: %+v, %v", done, err)
	}
	if _, _, err := e.db.FindQuarantine(id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("entry still there: %v", err)
	}
	rep, _ := e.db.FindReport(e.org.ID, done.Reports[0].ReportID)
	if !rep.ReceivedAt.Equal(entry.ReceivedAt) {
		t.Errorf("received_at %v, want the original %v", rep.ReceivedAt, entry.ReceivedAt)
	}
	if _, err := e.p.RetryQuarantine(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("retry of a deleted entry: %v", err)
	}
}

// TestQuarantineKeepsFirstBytes ensures an input larger than
// QuarantineMaxBytes keeps its first bytes, and the reason says so.
func TestQuarantineKeepsFirstBytes(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QuarantineMaxBytes = 100 })
	data := bytes.Repeat([]byte("not a report "), 50)
	for _, r := range []io.Reader{bytes.NewReader(data), io.MultiReader(bytes.NewReader(data))} {
		res, err := e.p.Ingest(context.Background(), r, importOf("big.txt"))
		if err != nil {
			t.Fatal(err)
		}
		entry, raw, _ := e.db.FindQuarantine(res.Quarantined)
		if !bytes.Equal(raw, data[:100]) || entry.Size != int64(len(data)) || !strings.Contains(entry.Reason, "first 100 of 650 bytes") {
			t.Errorf("entry %+v with %q", entry, raw)
		}
	}
}

// TestStopped ensures Run flushes and returns when its context ends, and
// later Ingest calls fail with ErrStopped instead of blocking.
func TestStopped(t *testing.T) {
	db := storetest.Open(t)
	p, err := New(Config{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ingest(context.Background(), strings.NewReader("x"), importOf("x")); !errors.Is(err, ErrStopped) {
		t.Errorf("Ingest after stop: %v, want ErrStopped", err)
	}
	if err := p.Run(context.Background()); err == nil {
		t.Errorf("second Run did not fail")
	}
}

// TestBadArrival ensures arrivals that cannot be routed at all are
// refused before anything is read.
func TestBadArrival(t *testing.T) {
	e := newEnv(t, nil)
	for _, d := range []Arrival{{Source: "ftp"}, {Source: SourceImport, OrgID: "not-an-id"}} {
		if _, err := e.p.Ingest(context.Background(), strings.NewReader("x"), d); err == nil {
			t.Errorf("arrival %+v accepted", d)
		}
	}
}

// TestMetrics ensures the counters and the commit histogram are exported.
func TestMetrics(t *testing.T) {
	reg := metrics.NewRegistry()
	e := newEnv(t, func(c *Config) { c.Metrics = reg })
	e.domain(t, "example.com")
	xml := reportgen.Generate(50, 7, reportgen.Options{})
	e.ingest(t, xml, importOf("m.xml"))
	e.ingest(t, xml, importOf("m.xml"))
	e.ingest(t, []byte("junk"), importOf("j"))
	failure := corpusPath("failure/dmarc_ruf_report_linkedin.eml") // reported domain example.com
	e.ingest(t, mustReadFile(t, failure), importOf(failure))
	var buf bytes.Buffer
	if err := reg.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`dmarcd_reports_ingested_total{source="import",kind="aggregate",outcome="stored"} 1`,
		`dmarcd_reports_ingested_total{source="import",kind="aggregate",outcome="duplicate"} 1`,
		`dmarcd_reports_ingested_total{source="import",kind="",outcome="quarantined"} 1`,
		`dmarcd_reports_ingested_total{source="import",kind="failure",outcome="stored"} 1`,
		`dmarcd_records_ingested_total 7`,
		`dmarcd_ingest_commit_seconds_count `,
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, buf.String())
		}
	}
}

// TestTooManyRecords ensures a report past Limits.MaxRecords is not stored,
// also after some of its chunks were committed, and is quarantined.
func TestTooManyRecords(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.BatchRecords = 10
		c.Limits = container.Limits{MaxRecords: 45}
	})
	e.domain(t, "example.com")
	res := e.ingest(t, reportgen.Generate(60, 50, reportgen.Options{}), importOf("big.xml"))
	if res.Quarantined == "" || !strings.Contains(res.Reason, "exceeds") {
		t.Fatalf("result %+v, want quarantined for its size", res)
	}
	for _, b := range reportBuckets {
		if n := countKeys(t, e.db, b); n != 0 {
			t.Errorf("bucket %s has %d keys", b, n)
		}
	}
}

// TestKnownRecipient ensures the RCPT TO check knows the domains'
// reporting addresses, whatever their case, and nothing else.
func TestKnownRecipient(t *testing.T) {
	e := newEnv(t, nil)
	dom := e.domain(t, "example.com")
	for addr, want := range map[string]bool{
		dom.ReportingEmail: true, strings.ToUpper(dom.ReportingEmail): true,
		"other@reports.test": false, "": false,
	} {
		if got := e.p.KnownRecipient(addr); got != want {
			t.Errorf("KnownRecipient(%q) = %v", addr, got)
		}
	}
}

// TestLogLine ensures each input gets one log line with its source, name,
// counts and outcome, and none of the report's contents.
func TestLogLine(t *testing.T) {
	var buf bytes.Buffer
	e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&buf, nil)) })
	e.domain(t, "example.com")
	e.ingest(t, reportgen.Generate(70, 9, reportgen.Options{OrgName: "secret-reporter.example"}), importOf("in.xml"))
	e.ingest(t, []byte("junk"), importOf("junk.txt"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
	}
	var first, second map[string]any
	if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("log lines are not JSON:\n%s", buf.String())
	}
	if first["source"] != "import" || first["name"] != "in.xml" || first["reports"] != 1.0 || first["records"] != 9.0 || first["outcome"] != "stored" {
		t.Errorf("first line %v", first)
	}
	if second["outcome"] != "quarantined" || second["reason"] == nil {
		t.Errorf("second line %v", second)
	}
	if strings.Contains(buf.String(), "secret-reporter") {
		t.Errorf("report contents logged:\n%s", buf.String())
	}
}

// TestLogLevels: with the logger at warn, a stored input writes no line
// and a failed one still writes its warning.
func TestLogLevels(t *testing.T) {
	var buf bytes.Buffer
	e := newEnv(t, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	e.domain(t, "example.com")
	e.ingest(t, reportgen.Generate(71, 3, reportgen.Options{}), importOf("in.xml"))
	if buf.Len() != 0 {
		t.Fatalf("a stored input logged at warn level:\n%s", buf.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.p.Ingest(ctx, bytes.NewReader(reportgen.Generate(72, 3, reportgen.Options{})), importOf("late.xml")); err == nil {
		t.Fatal("Ingest with a cancelled context succeeded")
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("want one JSON line, got %q: %v", buf.String(), err)
	}
	if line["level"] != "WARN" || line["msg"] != "ingest failed" || line["name"] != "late.xml" || line["error"] == nil {
		t.Errorf("line %v", line)
	}
}

// TestGeolocationOfRepeatedSources: every record gets its own source's
// location, from a direct look-up in the database, whether its source is
// the previous record's, one seen many records before (once the input
// keeps a cache, past geoCacheAfter sources), or one the databases do not
// know, in an input with more sources than that.
func TestGeolocationOfRepeatedSources(t *testing.T) {
	g := openGeo(t)
	known := reportgen.GeoTestIPs()
	var ips []string
	for i := range 3 * geoCacheAfter {
		switch {
		case i%7 == 0:
			ips = append(ips, known[i%len(known)])
		case i%5 == 0:
			ips = append(ips, ips[len(ips)-1]) // the previous record's source
		case i%3 == 0:
			ips = append(ips, ips[i/2]) // one seen long before
		default:
			ips = append(ips, fmt.Sprintf("198.51.%d.%d", i/250, i%250)) // unknown to the databases
		}
	}
	var b strings.Builder
	b.WriteString(`<?xml version="1.0"?><feedback><report_metadata><org_name>geo.example</org_name><email>d@geo.example</email>` +
		`<report_id>repeat-1</report_id><date_range><begin>1763683200</begin><end>1763769599</end></date_range></report_metadata>` +
		`<policy_published><domain>example.com</domain><p>none</p></policy_published>`)
	for _, ip := range ips {
		fmt.Fprintf(&b, `<record><row><source_ip>%s</source_ip><count>1</count><policy_evaluated><disposition>none</disposition>`+
			`<dkim>pass</dkim><spf>pass</spf></policy_evaluated></row><identifiers><header_from>example.com</header_from></identifiers>`+
			`<auth_results><spf><domain>example.com</domain><result>pass</result></spf></auth_results></record>`, ip)
	}
	b.WriteString(`</feedback>`)
	e := newEnv(t, func(c *Config) { c.Geo = g })
	e.domain(t, "example.com")
	res := e.ingest(t, []byte(b.String()), importOf("repeat.xml"))
	if len(res.Reports) != 1 || res.Reports[0].Records != len(ips) {
		t.Fatalf("result %+v, want one report of %d records", res, len(ips))
	}
	recs := allRecords(t, e.db, e.org.ID, res.Reports[0].ReportID)
	if len(recs) != len(ips) {
		t.Fatalf("%d records stored, want %d", len(recs), len(ips))
	}
	located := 0
	for i, r := range recs {
		if r.SourceIP != netip.MustParseAddr(ips[i]).String() {
			t.Fatalf("record %d is %s, want %s", i, r.SourceIP, ips[i])
		}
		want := g.Lookup(netip.MustParseAddr(ips[i]))
		if want == nil {
			if r.Geo != nil && (r.Geo.CountryCode != nil || r.Geo.ASN != nil) {
				t.Errorf("record %d (%s): located at %+v, the databases do not know it", i, r.SourceIP, r.Geo)
			}
			continue
		}
		located++
		if r.Geo == nil || strOf(r.Geo.CountryCode) != strOf(want.CountryCode) || strOf(r.Geo.City) != strOf(want.City) ||
			strOf(r.Geo.ASOrg) != strOf(want.ASOrg) {
			t.Errorf("record %d (%s): geo %+v, want country %q city %q AS %q", i, r.SourceIP, r.Geo,
				strOf(want.CountryCode), strOf(want.City), strOf(want.ASOrg))
		}
	}
	if located < 2*len(known) {
		t.Fatalf("only %d records of known sources", located)
	}
}

// TestLegacyReportDerivedVerdict ensures a legacy aggregate report whose
// policy_evaluated has no dkim and spf verdicts (AOL 2012) stores them as
// null, not "", and counts each record as DMARC pass or fail by its
// auth_results aligned with header_from (relaxed), saying so with
// dmarc_derived; a report with the verdicts is counted by them, as before.
func TestLegacyReportDerivedVerdict(t *testing.T) {
	e := newEnv(t, nil)
	e.domain(t, "example.com")
	res := e.ingest(t, mustReadFile(t, filepath.Join("..", "testdata", "legacy", "aol-2012.xml")), importOf("aol-2012.xml"))
	if len(res.Reports) != 1 || res.Reports[0].Duplicate {
		t.Fatalf("%+v", res)
	}
	id := res.Reports[0].ReportID
	rep, err := e.db.FindReport(e.org.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if rep.MessageCount != 10 || rep.DMARCPassCount != 8 || rep.DMARCFailCount != 2 {
		t.Errorf("report counts %d messages, %d pass, %d fail; want 10, 8, 2", rep.MessageCount, rep.DMARCPassCount, rep.DMARCFailCount)
	}
	st, err := e.db.ReportStatistics(e.org.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.DMARC.Pass != 8 || st.DMARC.Fail != 2 || st.DKIM.Pass != 5 || st.SPF.Pass != 3 {
		t.Errorf("statistics: dmarc %+v dkim %+v spf %+v; want 8/2, dkim pass 5, spf pass 3", st.DMARC, st.DKIM, st.SPF)
	}
	want := []string{"pass", "pass", "fail"}
	for i, r := range allRecords(t, e.db, e.org.ID, id) {
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if m["dkim"] != nil || m["spf"] != nil || m["dmarc"] != want[i] || m["dmarc_derived"] != true {
			t.Errorf("record %d: dkim %v spf %v dmarc %v dmarc_derived %v; want null, null, %s, true", i, m["dkim"], m["spf"], m["dmarc"], m["dmarc_derived"], want[i])
		}
	}
	res = e.ingest(t, mustReadFile(t, filepath.Join("..", "testdata", "corpus", "aggregate", "old_draft_from_wiki.xml")), importOf("wiki.xml"))
	for _, r := range allRecords(t, e.db, e.org.ID, res.Reports[0].ReportID) {
		raw, _ := json.Marshal(r)
		if !strings.Contains(string(raw), `"dkim":"fail","spf":"pass","dmarc":"pass"`) || !strings.Contains(string(raw), `"dmarc_derived":false`) {
			t.Errorf("a record with its verdicts: %s", raw)
		}
	}
}

// TestDuplicateWithDifferentContent ensures a report whose identity
// (reporter, report id, domain) is stored already is a duplicate, and says
// so apart when its content differs from the stored one (other dates,
// records or messages): it is not stored, and the log line says
// "duplicate with different content" (issue 24).
func TestDuplicateWithDifferentContent(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	e.domain(t, "example.com")
	o := reportgen.Options{ReportID: "same-id", Begin: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	later := o
	later.Begin = later.Begin.AddDate(0, 0, 1)
	s1, _ := reportgen.WriteReport(io.Discard, 1, 5, o)
	s2, _ := reportgen.WriteReport(io.Discard, 2, 5, o)
	if s1.Messages == s2.Messages {
		t.Fatal("seeds 1 and 2 give the same message count: pick others")
	}
	first := e.ingest(t, reportgen.Generate(1, 5, o), importOf("first.xml"))
	if len(first.Reports) != 1 || first.Reports[0].Duplicate {
		t.Fatalf("first: %+v", first)
	}
	for _, c := range []struct {
		name      string
		xml       []byte
		different bool
	}{
		{"the same", reportgen.Generate(1, 5, o), false},
		{"other messages", reportgen.Generate(2, 5, o), true},
		{"one more record", reportgen.Generate(1, 6, o), true},
		{"other dates", reportgen.Generate(1, 5, later), true},
	} {
		res := e.ingest(t, c.xml, importOf(c.name))
		if len(res.Reports) != 1 || !res.Reports[0].Duplicate || res.Reports[0].ReportID != first.Reports[0].ReportID ||
			res.Reports[0].DifferentContent != c.different {
			t.Errorf("%s: %+v, want a duplicate of %s (different content: %v)", c.name, res.Reports, first.Reports[0].ReportID, c.different)
		}
	}
	if _, n, err := e.db.ListReports(e.org.ID, store.ReportFilter{Page: store.Page{Page: 1, Limit: 10}}); err != nil || n != 1 {
		t.Errorf("%d reports stored (%v), want 1", n, err)
	}
	if got := strings.Count(logs.String(), `outcome="duplicate with different content"`); got != 3 {
		t.Errorf("%d log lines say duplicate with different content, want 3:\n%s", got, logs.String())
	}
}
