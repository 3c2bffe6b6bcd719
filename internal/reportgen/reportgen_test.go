package reportgen

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

type feedback struct {
	XMLName xml.Name
	Version string `xml:"version"`
	OrgName string `xml:"report_metadata>org_name"`
	Begin   int64  `xml:"report_metadata>date_range>begin"`
	Policy  struct {
		Domain string `xml:"domain"`
		PCT    string `xml:"pct"`
		NP     string `xml:"np"`
	} `xml:"policy_published"`
	Records []struct {
		SourceIP string `xml:"row>source_ip"`
		Count    int64  `xml:"row>count"`
		DKIM     string `xml:"row>policy_evaluated>dkim"`
		SPF      string `xml:"row>policy_evaluated>spf"`
		AuthDKIM []struct {
			Result string `xml:"result"`
		} `xml:"auth_results>dkim"`
	} `xml:"record"`
}

func decode(t *testing.T, b []byte) *feedback {
	t.Helper()
	var f feedback
	if err := xml.Unmarshal(b, &f); err != nil {
		t.Fatalf("generated report is not well-formed XML: %v", err)
	}
	return &f
}

// TestGenerateDeterministic ensures the same seed gives the same bytes and
// another seed different ones.
func TestGenerateDeterministic(t *testing.T) {
	a, b := Generate(7, 200, Options{}), Generate(7, 200, Options{})
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different reports")
	}
	if bytes.Equal(a, Generate(8, 200, Options{})) {
		t.Fatal("different seeds, same report")
	}
}

// TestWriteReportMatchesGenerate ensures streaming writes the bytes Generate
// returns and that Stats add up to what the XML says.
func TestWriteReportMatchesGenerate(t *testing.T) {
	for _, opts := range []Options{{}, {RFC9990: true, Domain: "example.org", OrgName: "A & B <Mail>"}} {
		var buf bytes.Buffer
		st, err := WriteReport(&buf, 42, 3000, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), Generate(42, 3000, opts)) {
			t.Fatal("WriteReport and Generate differ")
		}
		f := decode(t, buf.Bytes())
		if len(f.Records) != 3000 || st.Records != 3000 {
			t.Fatalf("records: xml %d, stats %d", len(f.Records), st.Records)
		}
		var msgs, pass int64
		for _, r := range f.Records {
			msgs += r.Count
			if r.DKIM == "pass" || r.SPF == "pass" {
				pass += r.Count
			}
		}
		if msgs != st.Messages || pass != st.DMARCPass {
			t.Fatalf("stats %+v, xml messages %d pass %d", st, msgs, pass)
		}
		if opts.OrgName != "" && f.OrgName != opts.OrgName {
			t.Fatalf("org_name %q, want %q", f.OrgName, opts.OrgName)
		}
	}
}

// TestGenerateRealistic ensures a report mixes what real reports hold: the
// geo test IPs, IPv6, IPv4-mapped sources, passing and failing rows,
// several DKIM results, and the RFC 9990 variant's namespace and tags.
func TestGenerateRealistic(t *testing.T) {
	f := decode(t, Generate(1, 5000, Options{}))
	seen := map[string]bool{}
	var v6, mapped, pass, fail, multiDKIM int
	for _, r := range f.Records {
		seen[r.SourceIP] = true
		switch {
		case strings.HasPrefix(r.SourceIP, "::ffff:"):
			mapped++
		case strings.Contains(r.SourceIP, ":"):
			v6++
		}
		if r.DKIM == "pass" || r.SPF == "pass" {
			pass++
		} else {
			fail++
		}
		if len(r.AuthDKIM) > 1 {
			multiDKIM++
		}
	}
	for _, ip := range GeoTestIPs() {
		if !seen[ip] {
			t.Errorf("geo test IP %s never used", ip)
		}
	}
	if v6 == 0 || mapped == 0 || pass < fail || fail == 0 || multiDKIM == 0 {
		t.Errorf("not realistic: v6=%d mapped=%d pass=%d fail=%d multiDKIM=%d", v6, mapped, pass, fail, multiDKIM)
	}
	if f.Policy.PCT != "100" || f.XMLName.Space != "" {
		t.Errorf("RFC 7489 report: pct %q namespace %q", f.Policy.PCT, f.XMLName.Space)
	}
	f2 := decode(t, Generate(1, 10, Options{RFC9990: true}))
	if f2.XMLName.Space != Namespace2 || f2.Policy.NP == "" || f2.Policy.PCT != "" {
		t.Errorf("RFC 9990 report: namespace %q np %q pct %q", f2.XMLName.Space, f2.Policy.NP, f2.Policy.PCT)
	}
}

// TestGzipZip ensures the wrappers hold the report unchanged.
func TestGzipZip(t *testing.T) {
	x := Generate(3, 50, Options{})
	zr, err := gzip.NewReader(bytes.NewReader(Gzip(x)))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(zr); !bytes.Equal(got, x) {
		t.Fatal("gzip round trip differs")
	}
	z := Zip("r.xml", x)
	ar, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil || len(ar.File) != 1 || ar.File[0].Name != "r.xml" {
		t.Fatalf("zip: %v", err)
	}
	rc, _ := ar.File[0].Open()
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, x) {
		t.Fatal("zip round trip differs")
	}
}

// TestDefaultDates ensures the date range is one day derived from the seed.
func TestDefaultDates(t *testing.T) {
	a, b := decode(t, Generate(0, 1, Options{})), decode(t, Generate(1, 1, Options{}))
	if b.Begin-a.Begin != 86400 {
		t.Fatalf("begin %d and %d are not a day apart", a.Begin, b.Begin)
	}
	if !strings.Contains(string(Generate(0, 1, Options{})), "<end>"+strconv.FormatInt(a.Begin+86399, 10)+"</end>") {
		t.Fatal("end is not begin + 1 day - 1 s")
	}
}

// BenchmarkWriteReport measures generation speed (bytes/s).
func BenchmarkWriteReport(b *testing.B) {
	var n int64
	for b.Loop() {
		c := &countWriter{}
		WriteReport(c, 1, 10000, Options{})
		n = c.n
	}
	b.SetBytes(n)
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
