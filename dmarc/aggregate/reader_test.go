package aggregate

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"golang.org/x/text/encoding/unicode"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// aggRead parses one corpus file (plain XML) with Reader.
func aggRead(tb testing.TB, path string) *aggRefResult {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(aggCorpusDir, path))
	if err != nil {
		tb.Fatal(err)
	}
	res, err := aggStreamParse(bytes.NewReader(data), container.Limits{})
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return res
}

// TestAggregateCorpusCounts ensures every aggregate file of the corpus
// (XML, gzip, zip, mail) yields one report with the record and message
// counts of the corpus README.
func TestAggregateCorpusCounts(t *testing.T) {
	for _, f := range aggCorpusFiles(t) {
		t.Run(f.path, func(t *testing.T) {
			fh, err := os.Open(filepath.Join(aggCorpusDir, f.path))
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			payloads, records := 0, 0
			var msgs int64
			err = Extract(fh, container.Limits{}, func(p container.Payload) error {
				payloads++
				_, recs, err := Parse(p.Body, container.Limits{})
				for _, r := range recs {
					records++
					msgs += r.Count
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if payloads != 1 || records != f.records || msgs != f.msgs {
				t.Fatalf("payloads %d, records %d, msgs %d; want 1, %d, %d", payloads, records, msgs, f.records, f.msgs)
			}
		})
	}
}

// TestAggregateCorpusMatchesReference ensures that on every corpus XML
// file encoding/xml can read the streaming reader and the encoding/xml
// reference agree, and that the reference indeed refuses the two
// ill-formed files we recover. (The ikea file's unclosed wrapper lies
// outside <feedback>, so a token-level reader gets through it.)
func TestAggregateCorpusMatchesReference(t *testing.T) {
	broken := map[string]bool{
		"aggregate/invalid_utf_8.xml": true,
		"aggregate/invalid_xml.xml":   true,
	}
	for _, f := range aggCorpusFiles(t) {
		if !strings.HasSuffix(f.path, ".xml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(aggCorpusDir, f.path))
		if err != nil {
			t.Fatal(err)
		}
		ref, refErr := aggRefParse(bytes.NewReader(data), container.Limits{})
		got := aggRead(t, f.path)
		switch {
		case broken[f.path] && refErr == nil:
			t.Errorf("%s: encoding/xml accepts a file listed as broken", f.path)
		case !broken[f.path] && refErr != nil:
			t.Errorf("%s: reference: %v", f.path, refErr)
		case !broken[f.path] && !reflect.DeepEqual(got, ref):
			t.Errorf("%s: streaming and reference differ:\n%+v\n%+v", f.path, got.Header, ref.Header)
		}
	}
}

// TestAggregateCorpusFields ensures the quirks of particular corpus files
// come out as decided: lower-cased enums, trimmed values, recovered broken
// values, RFC 9990 fields, empty elements dropped, IPv6 sources.
func TestAggregateCorpusFields(t *testing.T) {
	pct := func(n int) *int { return &n }
	tests := []struct {
		path  string
		check func(t *testing.T, r *aggRefResult)
	}{
		{"aggregate/rfc9990-sample.xml", func(t *testing.T, r *aggRefResult) {
			h := r.Header
			want := PolicyPublished{Domain: "example.com", P: "quarantine", SP: "none", NP: "none", Testing: "n", DiscoveryMethod: "treewalk"}
			if h.Namespace != NamespaceRFC9990 || h.Generator != "Example DMARC Aggregate Reporter v1.2" || !reflect.DeepEqual(h.Policy, want) {
				t.Errorf("header %+v", h)
			}
			if !h.DateBegin.Equal(time.Date(1979, 8, 7, 0, 0, 0, 0, time.UTC)) || h.DateBegin.Location() != time.UTC {
				t.Errorf("begin %v", h.DateBegin)
			}
			if rec := r.Records[0]; rec.Disposition != "pass" || rec.Count != 123 || !rec.DMARCPass() {
				t.Errorf("record %+v", rec)
			}
		}},
		{"aggregate_invalid/report_with_upper_cased_pass.xml", func(t *testing.T, r *aggRefResult) {
			rec := r.Records[0]
			if r.Header.OrgName != "example.com" || rec.Disposition != "none" || rec.DKIM != "pass" || rec.SPF != "pass" ||
				rec.DKIMResults[0].Result != "pass" || rec.SPFResults[0].Result != "pass" {
				t.Errorf("org %q, record %+v", r.Header.OrgName, rec)
			}
		}},
		{"aggregate/invalid_xml.xml", func(t *testing.T, r *aggRefResult) {
			// `<email><bad-xml@bad-xml.net></email>`: the '<' that starts no
			// tag is text, then the angle brackets go.
			if r.Header.Email != "bad-xml@bad-xml.net" || r.Records[0].HeaderFrom != "bad<xml.net" {
				t.Errorf("email %q, header_from %q", r.Header.Email, r.Records[0].HeaderFrom)
			}
		}},
		{"aggregate/invalid_utf_8.xml", func(t *testing.T, r *aggRefResult) {
			if r.Records[0].HeaderFrom != "bad_byte\uFFFD" || r.Header.OrgName != "" {
				t.Errorf("header_from %q", r.Records[0].HeaderFrom)
			}
		}},
		{"aggregate/ikea.com!example.de!1538690400!1538776800.xml", func(t *testing.T, r *aggRefResult) {
			if r.Header.OrgName != "ikea.com" || r.Header.Policy.Domain != "example.de" || !reflect.DeepEqual(r.Header.Policy.PCT, pct(100)) {
				t.Errorf("header %+v", r.Header)
			}
		}},
		{"aggregate/empty_reason.xml", func(t *testing.T, r *aggRefResult) {
			if rec := r.Records[0]; rec.Reasons != nil || rec.EnvelopeTo != "example.net" {
				t.Errorf("record %+v", rec)
			}
		}},
		{"aggregate/addisonfoods.com!example.com!1536105600!1536191999.xml", func(t *testing.T, r *aggRefResult) {
			if rec := r.Records[0]; rec.SPFResults != nil || len(rec.DKIMResults) != 1 {
				t.Errorf("record %+v", rec)
			}
		}},
		{"aggregate/usssa.com!example.com!1538784000!1538870399.xml", func(t *testing.T, r *aggRefResult) {
			if rec := r.Records[0]; rec.EnvelopeFrom != "" || rec.DKIMResults != nil || rec.SPFResults != nil {
				t.Errorf("record %+v", rec)
			}
		}},
		{"extract_report/nice-input.xml", func(t *testing.T, r *aggRefResult) {
			v6, multi := 0, 0
			for _, rec := range r.Records {
				if rec.SourceIP.Is6() {
					v6++
				}
				if len(rec.DKIMResults) > 1 {
					multi++
				}
			}
			if v6 != 1 || multi != 15 || r.Header.Policy.NP == "" {
				t.Errorf("v6 %d, multi-DKIM %d, np %q", v6, multi, r.Header.Policy.NP)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) { tt.check(t, aggRead(t, tt.path)) })
	}
}

// aggDoc builds a small report around records (and header extras).
func aggDoc(decl, meta, records string) string {
	return decl + `<feedback><version>1.0</version><report_metadata><org_name>Org</org_name>` +
		`<email>r@org.example</email><report_id>42</report_id>` + meta +
		`<date_range><begin>1700000000</begin><end>1700086399</end></date_range></report_metadata>` +
		`<policy_published><domain>example.com</domain><p>none</p></policy_published>` + records + `</feedback>`
}

// aggRec builds a record with the given row and extra record content.
func aggRec(ip, count, extra string) string {
	return `<record><row><source_ip>` + ip + `</source_ip><count>` + count + `</count>` +
		`<policy_evaluated><disposition>none</disposition><dkim>pass</dkim><spf>fail</spf></policy_evaluated></row>` +
		`<identifiers><header_from>example.com</header_from></identifiers>` + extra + `</record>`
}

// TestAggregateQuirks ensures each per-case decision on what reporters
// send: recovered values, skipped records, and refused inputs.
func TestAggregateQuirks(t *testing.T) {
	utf16 := func(s string, e unicode.Endianness, bom unicode.BOMPolicy) string {
		b, err := unicode.UTF16(e, bom).NewEncoder().String(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one := aggRec("192.0.2.1", "1", "")
	tests := []struct {
		name    string
		in      string
		err     error // sentinel expected, nil for success
		skipped int
		check   func(h *Header, recs []Record) bool
	}{
		{name: "single-quoted latin-1 declaration", in: aggDoc("<?xml version='1.0' encoding='ISO-8859-1'?>", "<extra_contact_info>caf\xe9</extra_contact_info>", one),
			check: func(h *Header, _ []Record) bool { return h.ExtraContactInfo == "café" }},
		{name: "windows-1252 declaration", in: aggDoc(`<?xml version="1.0" encoding="windows-1252"?>`, "<extra_contact_info>\x93q\x94</extra_contact_info>", one),
			check: func(h *Header, _ []Record) bool { return h.ExtraContactInfo == "\u201cq\u201d" }},
		{name: "unknown charset read as UTF-8", in: aggDoc(`<?xml version="1.0" encoding="x-klingon"?>`, "<extra_contact_info>café</extra_contact_info>", one),
			check: func(h *Header, _ []Record) bool { return h.ExtraContactInfo == "café" }},
		{name: "utf-16 declared over 8-bit bytes", in: aggDoc(`<?xml version="1.0" encoding="UTF-16"?>`, "", one),
			check: func(h *Header, recs []Record) bool { return h.OrgName == "Org" && len(recs) == 1 }},
		{name: "latin-1 bytes in a UTF-8 document are replaced", in: aggDoc("", "<extra_contact_info>caf\xe9</extra_contact_info>", one),
			check: func(h *Header, _ []Record) bool { return h.ExtraContactInfo == "caf\uFFFD" }},
		{name: "UTF-8 BOM", in: "\xEF\xBB\xBF" + aggDoc(`<?xml version="1.0" encoding="iso-8859-1"?>`, "<extra_contact_info>café</extra_contact_info>", one),
			check: func(h *Header, _ []Record) bool { return h.ExtraContactInfo == "café" }},
		{name: "UTF-16LE with BOM", in: utf16(aggDoc(`<?xml version="1.0" encoding="UTF-16"?>`, "<extra_contact_info>café</extra_contact_info>", one), unicode.LittleEndian, unicode.UseBOM),
			check: func(h *Header, recs []Record) bool {
				return h.ExtraContactInfo == "café" && len(recs) == 1
			}},
		{name: "UTF-16BE without BOM", in: utf16(aggDoc("", "", one), unicode.BigEndian, unicode.IgnoreBOM),
			check: func(h *Header, recs []Record) bool { return h.OrgName == "Org" && len(recs) == 1 }},
		{name: "CRLF and trailing tabs", in: strings.ReplaceAll(aggDoc("<?xml version=\"1.0\"?>\r\n", "", aggRec("\t192.0.2.1\t\r\n", " 3\t", "")), "><", ">\r\n\t<"),
			check: func(_ *Header, recs []Record) bool {
				return recs[0].Count == 3 && recs[0].SourceIP.String() == "192.0.2.1"
			}},
		{name: "mixed-case and unknown enums", in: aggDoc("", "", strings.NewReplacer("none", "Quarantine", ">pass<", ">PASS<", ">fail<", ">HardFail<").Replace(one)),
			check: func(_ *Header, recs []Record) bool {
				return recs[0].Disposition == "quarantine" && recs[0].DKIM == "pass" && recs[0].SPF == "hardfail" && recs[0].DMARCPass()
			}},
		{name: "report id and email in angle brackets", in: strings.NewReplacer("<report_id>42", "<report_id>&lt;42@org.example&gt;", "<email>r@org.example", "<email> &lt;r@org.example&gt; ").Replace(aggDoc("", "", one)),
			check: func(h *Header, _ []Record) bool {
				return h.ReportID == "42@org.example" && h.Email == "r@org.example"
			}},
		{name: "IPv6 and IPv4-mapped sources", in: aggDoc("", "", aggRec("2001:DB8::1", "1", "")+aggRec("::ffff:192.0.2.7", "1", "")),
			check: func(_ *Header, recs []Record) bool {
				return recs[0].SourceIP == netip.MustParseAddr("2001:db8::1") && recs[1].SourceIP == netip.MustParseAddr("192.0.2.7")
			}},
		{name: "count of 0 is kept", in: aggDoc("", "", aggRec("192.0.2.1", "0", "")),
			check: func(_ *Header, recs []Record) bool { return len(recs) == 1 && recs[0].Count == 0 }},
		{name: "record without a valid source_ip is skipped", in: aggDoc("", "", aggRec("mail.example.net", "5", "")+aggRec("", "1", "")+one), skipped: 2,
			check: func(_ *Header, recs []Record) bool { return len(recs) == 1 }},
		{name: "record without a valid count is skipped", in: aggDoc("", "", aggRec("192.0.2.1", "-3", "")+aggRec("192.0.2.1", "many", "")+one), skipped: 2,
			check: func(_ *Header, recs []Record) bool { return len(recs) == 1 }},
		{name: "missing org_name, envelope_from and spf", in: strings.Replace(aggDoc("", "", one), "<org_name>Org</org_name>", "", 1),
			check: func(h *Header, recs []Record) bool {
				return h.OrgName == "" && recs[0].EnvelopeFrom == "" && recs[0].SPFResults == nil
			}},
		{name: "empty elements", in: aggDoc("", "<error/><error> </error>", aggRec("192.0.2.1", "1", "<auth_results><dkim/><spf><domain></domain><result>none</result></spf></auth_results>")),
			check: func(h *Header, recs []Record) bool {
				return h.Errors == nil && recs[0].DKIMResults == nil && reflect.DeepEqual(recs[0].SPFResults, []SPFResult{{Result: "none"}})
			}},
		{name: "entities, CDATA and comments in values", in: aggDoc("", "<extra_contact_info>A&amp;B &#x41;&#66;&#x0000000000000000043; <![CDATA[<x>&amp;]]><!-- c --> AT&T &bogus; &#xD800;</extra_contact_info>", one),
			check: func(h *Header, _ []Record) bool {
				return h.ExtraContactInfo == "A&B ABC <x>&amp; AT&T &bogus; \uFFFD"
			}},
		{name: "prefixed RFC 9990 namespace and extensions", in: `<d:feedback xmlns:d="` + NamespaceRFC9990 + `"><d:report_metadata><d:org_name>O</d:org_name></d:report_metadata>` +
			`<d:extension><d:record>not a record</d:record></d:extension>` + aggRec("192.0.2.1", "1", "<extensions><x>1</x></extensions>") + `</d:feedback>`,
			check: func(h *Header, recs []Record) bool {
				return h.Namespace == NamespaceRFC9990 && h.OrgName == "O" && len(recs) == 1
			}},
		{name: "fractional date", in: strings.Replace(aggDoc("", "", one), "1700000000", "1700000000.0", 1),
			check: func(h *Header, _ []Record) bool { return h.DateBegin.Unix() == 1700000000 }},
		{name: "metadata after a record", in: `<feedback>` + one + `<report_metadata><org_name>x</org_name></report_metadata></feedback>`, err: container.ErrMalformed},
		{name: "policy after a record", in: `<feedback><report_metadata/>` + one + `<policy_published/></feedback>`, err: container.ErrMalformed},
		{name: "DOCTYPE", in: `<?xml version="1.0"?><!DOCTYPE feedback SYSTEM "x.dtd">` + aggDoc("", "", one), err: container.ErrMalformed},
		{name: "billion laughs", in: `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>` + aggDoc("", "<extra_contact_info>&lol2;</extra_contact_info>", one), err: container.ErrMalformed},
		{name: "entity declaration inside the report", in: strings.Replace(aggDoc("", "", one), "<record>", `<!ENTITY x "y"><record>`, 1), err: container.ErrMalformed},
		{name: "truncated in the header", in: aggDoc("", "", one)[:120], err: container.ErrMalformed},
		{name: "truncated in a record", in: aggDoc("", "", one+one)[:len(aggDoc("", "", one+one))-40], err: container.ErrMalformed},
		{name: "truncated after the last record", in: strings.TrimSuffix(aggDoc("", "", one), "</feedback>"), err: container.ErrMalformed},
		{name: "empty input", in: "", err: container.ErrNoReport},
		{name: "not a report", in: `<?xml version="1.0"?><html><body>feedback</body></html>`, err: container.ErrNoReport},
		{name: "unreadable date", in: strings.Replace(aggDoc("", "", one), "1700000000", "yesterday", 1), err: container.ErrMalformed},
		{name: "nesting too deep", in: aggDoc("", "", strings.Repeat("<x>", 300)+strings.Repeat("</x>", 300)), err: container.ErrMalformed},
		{name: "repeated elements past the bound are ignored", in: aggDoc("", strings.Repeat("<error>e</error>", 150), aggRec("192.0.2.1", "1", "<auth_results>"+strings.Repeat("<dkim/>", 200)+"<dkim><domain>x</domain></dkim></auth_results>")),
			check: func(h *Header, recs []Record) bool {
				return len(h.Errors) == aggMaxRepeat && recs[0].DKIMResults == nil
			}},
		{name: "element name too long", in: aggDoc("", "<"+strings.Repeat("n", xsMaxName+1)+"/>", one), err: container.ErrMalformed},
		{name: "value too long", in: aggDoc("", "<extra_contact_info>"+strings.Repeat("a", xsMaxValue+1)+"</extra_contact_info>", one), err: container.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewReader(strings.NewReader(tt.in), container.Limits{})
			var recs []Record
			for err == nil {
				var rec *Record
				if rec, err = a.Next(); err == nil {
					recs = append(recs, *rec)
				}
			}
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("error %v, want %v", err, tt.err)
				}
				return
			}
			if err != io.EOF {
				t.Fatalf("error %v", err)
			}
			if a.Skipped() != tt.skipped || len(a.Warnings()) != tt.skipped {
				t.Errorf("skipped %d, warnings %q; want %d", a.Skipped(), a.Warnings(), tt.skipped)
			}
			if !tt.check(a.Header(), recs) {
				t.Errorf("header %+v\nrecords %+v", a.Header(), recs)
			}
		})
	}
}

// TestAggregateMergeSemantics ensures repeated sections merge, leaves
// keep only their own text, and unknown elements are skipped exactly as
// encoding/xml decodes them.
func TestAggregateMergeSemantics(t *testing.T) {
	in := `<feedback><report_metadata><org_name>a<b>skipped</b>c</org_name></report_metadata>` +
		`<report_metadata><email>e@x</email><org_name>last wins</org_name></report_metadata><policy_published><domain>d</domain></policy_published>` +
		`<record><row><source_ip>bad</source_ip><count>2</count></row><row><source_ip>192.0.2.9</source_ip>` +
		`<policy_evaluated><reason><type>forwarded</type></reason></policy_evaluated><policy_evaluated><reason><type>mailing_list</type></reason></policy_evaluated></row>` +
		`<identifiers><x><header_from>nested.example</header_from></x><header_from>h.example</header_from></identifiers>` +
		`<auth_results><dkim><domain>one</domain></dkim></auth_results><auth_results><dkim><domain>two</domain></dkim><spf><domain>s</domain></spf></auth_results>` +
		`</record><version>9.9</version></feedback>`
	got, err := aggStreamParse(strings.NewReader(in), container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := aggRefParse(strings.NewReader(in), container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("streaming and reference differ:\n%+v %+v\n%+v %+v", got.Header, got.Records, ref.Header, ref.Records)
	}
	rec := got.Records[0]
	if got.Header.OrgName != "last wins" || got.Header.Email != "e@x" || got.Header.Version != "" || rec.Count != 2 ||
		rec.SourceIP.String() != "192.0.2.9" || len(rec.Reasons) != 2 || rec.HeaderFrom != "h.example" ||
		len(rec.DKIMResults) != 2 || len(rec.SPFResults) != 1 {
		t.Fatalf("header %+v, record %+v", got.Header, rec)
	}
}

// TestAggregateLimits ensures MaxRecords and MaxDecompressed stop a report
// with container.ErrTooLarge, and that records before the limit were delivered.
func TestAggregateLimits(t *testing.T) {
	data := reportgen.Generate(5, 50, reportgen.Options{})
	a, err := NewReader(bytes.NewReader(data), container.Limits{MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; ; n++ {
		if _, err = a.Next(); err != nil {
			break
		}
	}
	if n != 10 || !errors.Is(err, container.ErrTooLarge) {
		t.Fatalf("records %d, error %v; want 10, container.ErrTooLarge", n, err)
	}
	if _, again := a.Next(); again != err {
		t.Fatalf("error not sticky: %v", again)
	}
	if _, _, err := Parse(bytes.NewReader(data), container.Limits{MaxDecompressed: int64(len(data) - 20)}); !errors.Is(err, container.ErrTooLarge) {
		t.Fatalf("MaxDecompressed: %v", err)
	}
	if _, _, err := Parse(bytes.NewReader(data), container.Limits{MaxDecompressed: int64(len(data))}); err != nil {
		t.Fatalf("input of exactly MaxDecompressed bytes: %v", err)
	}
}

// TestAggregateGeneratedMatchesReference ensures the streaming reader and
// encoding/xml agree on generated reports of both schema versions, and
// that their totals are the generator's.
func TestAggregateGeneratedMatchesReference(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		opts := reportgen.Options{RFC9990: seed%2 == 0, OrgName: "Mail & Co <reports>"}
		var buf bytes.Buffer
		st, err := reportgen.WriteReport(&buf, seed, 500, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := aggStreamParse(bytes.NewReader(buf.Bytes()), container.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		ref, err := aggRefParse(bytes.NewReader(buf.Bytes()), container.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("seed %d: streaming and reference differ", seed)
		}
		var msgs, pass int64
		for _, r := range got.Records {
			msgs += r.Count
			if r.DMARCPass() {
				pass += r.Count
			}
		}
		if len(got.Records) != st.Records || msgs != st.Messages || pass != st.DMARCPass || got.Header.OrgName != opts.OrgName {
			t.Fatalf("seed %d: %d records, %d msgs, %d pass; generator %+v", seed, len(got.Records), msgs, pass, st)
		}
	}
}

// TestAggregateChunkedReads ensures the result does not depend on how the
// input is split into reads (every token straddles a refill somewhere).
func TestAggregateChunkedReads(t *testing.T) {
	inputs := map[string][]byte{"generated": reportgen.Generate(31, 300, reportgen.Options{RFC9990: true})}
	for _, f := range aggCorpusFiles(t) {
		if strings.HasSuffix(f.path, ".xml") {
			data, err := os.ReadFile(filepath.Join(aggCorpusDir, f.path))
			if err != nil {
				t.Fatal(err)
			}
			inputs[f.path] = data
		}
	}
	for name, data := range inputs {
		want, err := aggStreamParse(bytes.NewReader(data), container.Limits{})
		if err != nil {
			t.Fatal(name, err)
		}
		for rname, r := range map[string]io.Reader{
			"one byte":   iotest.OneByteReader(bytes.NewReader(data)),
			"half":       iotest.HalfReader(bytes.NewReader(data)),
			"data + EOF": iotest.DataErrReader(bytes.NewReader(data)),
		} {
			got, err := aggStreamParse(r, container.Limits{})
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s read %s: %v, results equal: %v", name, rname, err, reflect.DeepEqual(got, want))
			}
		}
	}
}

// TestAggregateMillionRecordsBoundedMemory ensures a 1,000,000-record
// report streams through Reader with a peak Go heap under 64 MB.
func TestAggregateMillionRecordsBoundedMemory(t *testing.T) {
	if testing.Short() || aggRace {
		t.Skip("writes and reads ~750 MB of XML; skipped with -short and -race")
	}
	const records = 1_000_000
	pr, pw := io.Pipe()
	stats := make(chan reportgen.Stats, 1)
	go func() {
		st, err := reportgen.WriteReport(pw, 99, records, reportgen.Options{})
		stats <- st
		pw.CloseWithError(err)
	}()
	runtime.GC()
	var ms runtime.MemStats
	var peak uint64
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	a, err := NewReader(pr, container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	n, msgs := 0, int64(0)
	for {
		rec, err := a.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
		msgs += rec.Count
		if n%10000 == 0 {
			sample()
		}
	}
	sample()
	st := <-stats
	if n != st.Records || msgs != st.Messages {
		t.Fatalf("read %d records / %d msgs, wrote %+v", n, msgs, st)
	}
	t.Logf("peak heap %.1f MB over %d records", float64(peak)/1e6, n)
	if peak >= 64<<20 {
		t.Fatalf("peak heap %d bytes, want < 64 MB", peak)
	}
}
