// Package reportgen generates realistic DMARC aggregate reports from a seed,
// deterministically: the sample reports of 'serve --demo' (cli/demo.go),
// and the reports of tests and benchmarks. RFC 7489 XML or its RFC 9990
// variant, plain, gzip or zip, in memory or streamed to a writer (a
// 1,000,000-record report needs no more memory than a 10-record one).
//
// The records look like what a large mailbox provider sends: sources from
// real senders' address ranges (IPv4 and IPv6, now and then IPv4-mapped),
// the geolocation test addresses of the MaxMind test databases, mostly
// passing mail with forwarded, spoofed and misconfigured streams mixed in,
// zero to three DKIM signatures, one or two SPF results, optional
// envelope_from and envelope_to, and policy override reasons.
package reportgen

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Namespace2 is the RFC 9990 aggregate report namespace.
const Namespace2 = "urn:ietf:params:xml:ns:dmarc-2.0"

// GeoTestIPs returns the source addresses whose locations the MaxMind test
// databases know; reports use them now and then so that geolocation can be
// asserted end to end.
func GeoTestIPs() []string {
	return []string{"81.2.69.142", "89.160.20.112", "216.160.83.56", "2001:480:10::1"}
}

// Options shapes a generated report. The zero value is a Google-style
// RFC 7489 report for example.com.
type Options struct {
	RFC9990  bool      // namespace urn:ietf:params:xml:ns:dmarc-2.0, np/testing/discovery_method/generator, no pct
	Domain   string    // policy_published domain; default "example.com"
	OrgName  string    // default "google.com"
	Email    string    // default "noreply-dmarc-support@google.com"
	ReportID string    // default: derived from the seed
	Begin    time.Time // start of the one-day date_range; default 2024-06-13 UTC plus seed%365 days
}

func (o Options) withDefaults(seed int64) Options {
	if o.Domain == "" {
		o.Domain = "example.com"
	}
	if o.OrgName == "" {
		o.OrgName = "google.com"
	}
	if o.Email == "" {
		o.Email = "noreply-dmarc-support@google.com"
	}
	if o.ReportID == "" {
		o.ReportID = strconv.FormatUint(uint64(seed)*0x9E3779B97F4A7C15>>1, 10)
	}
	if o.Begin.IsZero() {
		o.Begin = time.Date(2024, 6, 13, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(uint64(seed)%365))
	}
	return o
}

// Stats sums up a generated report, for tests to assert against.
type Stats struct {
	Records   int
	Messages  int64 // sum of the records' counts
	DMARCPass int64 // messages whose policy_evaluated dkim or spf is pass
}

// Generate returns a report of the given number of records. The same seed,
// record count and options always give the same bytes.
func Generate(seed int64, records int, opts Options) []byte {
	var buf bytes.Buffer
	if _, err := WriteReport(&buf, seed, records, opts); err != nil {
		panic(err) // bytes.Buffer does not fail
	}
	return buf.Bytes()
}

// WriteReport streams the report Generate returns to w, without holding it
// in memory, and returns its totals. Errors are those of w.
func WriteReport(w io.Writer, seed int64, records int, opts Options) (Stats, error) {
	opts = opts.withDefaults(seed)
	g := &generator{
		rnd:  rand.New(rand.NewPCG(uint64(seed), 0xDA3E39CB94B95BDB)),
		opts: opts,
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	g.buf = g.header(g.buf[:0])
	for range records {
		if _, err := bw.Write(g.buf); err != nil {
			return g.stats, err
		}
		g.buf = g.record(g.buf[:0])
	}
	g.buf = append(g.buf, "</feedback>\n"...)
	if _, err := bw.Write(g.buf); err != nil {
		return g.stats, err
	}
	return g.stats, bw.Flush()
}

// Gzip compresses a report as reporters send it (a .xml.gz attachment).
func Gzip(xml []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(xml)
	zw.Close()
	return buf.Bytes()
}

// Zip packs a report as a one-member zip archive named name.
func Zip(name string, xml []byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Date(2024, 6, 14, 0, 0, 0, 0, time.UTC)})
	f.Write(xml)
	zw.Close()
	return buf.Bytes()
}

type generator struct {
	rnd   *rand.Rand
	opts  Options
	stats Stats
	buf   []byte
}

func (g *generator) header(b []byte) []byte {
	o := g.opts
	b = append(b, "<?xml version=\"1.0\" encoding=\"UTF-8\" ?>\n"...)
	if o.RFC9990 {
		b = append(b, "<feedback xmlns=\""+Namespace2+"\">\n"...)
	} else {
		b = append(b, "<feedback>\n"...)
	}
	b = append(b, "  <version>1.0</version>\n  <report_metadata>\n"...)
	b = elem(b, 4, "org_name", o.OrgName)
	b = elem(b, 4, "email", o.Email)
	b = elem(b, 4, "extra_contact_info", "https://support.google.com/a/answer/2466580")
	b = elem(b, 4, "report_id", o.ReportID)
	b = append(b, "    <date_range>\n"...)
	b = elem(b, 6, "begin", strconv.FormatInt(o.Begin.Unix(), 10))
	b = elem(b, 6, "end", strconv.FormatInt(o.Begin.Add(24*time.Hour-time.Second).Unix(), 10))
	b = append(b, "    </date_range>\n"...)
	if o.RFC9990 {
		b = elem(b, 4, "generator", "dmarcd reportgen 1.0")
	}
	b = append(b, "  </report_metadata>\n  <policy_published>\n"...)
	b = elem(b, 4, "domain", o.Domain)
	if o.RFC9990 {
		b = elem(b, 4, "discovery_method", "treewalk")
	}
	b = elem(b, 4, "adkim", "r")
	b = elem(b, 4, "aspf", "r")
	b = elem(b, 4, "p", "none")
	b = elem(b, 4, "sp", "none")
	if o.RFC9990 {
		b = elem(b, 4, "np", "reject")
		b = elem(b, 4, "testing", "n")
	} else {
		b = elem(b, 4, "pct", "100")
	}
	b = elem(b, 4, "fo", "1")
	return append(b, "  </policy_published>\n"...)
}

// elem appends <name>escaped value</name> on its own line.
func elem(b []byte, indent int, name, value string) []byte {
	b = append(b, "            "[:indent]...)
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = escape(b, value)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, ">\n"...)
}

func escape(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "<>&\"'") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '&':
			b = append(b, "&amp;"...)
		case '"':
			b = append(b, "&quot;"...)
		case '\'':
			b = append(b, "&apos;"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// A sender is a source of mail: its addresses and how its mail fares.
type sender struct {
	v4       []string // /16 prefixes ("209.85."), completed at random
	v6       string   // a /64 prefix ("2607:f8b0:4864:20::"), or ""
	dkim     string   // signing domain; "@" means the report's domain
	selector string
	spf      string // envelope domain; "@" means a bounce subdomain of the report's domain
	aligned  bool   // authorized by the domain owner
	// platform is the domain of the further signatures the sender's
	// platform adds ("%s" is the report's domain with its dots as dashes);
	// "" means its dkim domain. Services sign twice (the customer's
	// domain and their own); nobody signs with a stranger's domain.
	platform string
}

var senders = []sender{
	{v4: []string{"209.85.", "74.125."}, v6: "2607:f8b0:4864:20::", dkim: "@", selector: "google", spf: "@", aligned: true, platform: "%s.20230601.gappssmtp.com"},
	{v4: []string{"40.107.", "52.101."}, v6: "2a01:111:f400:7e1a::", dkim: "@", selector: "selector1", spf: "@", aligned: true, platform: "%s.onmicrosoft.com"},
	{v4: []string{"167.89.", "149.72."}, dkim: "sendgrid.net", selector: "s1", spf: "sendgrid.net", aligned: true},
	{v4: []string{"54.240.", "23.251."}, dkim: "amazonses.com", selector: "ug7nbtf4gccmlpwj322ax3p6ow6yfsug", spf: "amazonses.com", aligned: true},
	{v4: []string{"198.2.", "205.201."}, dkim: "mcsv.net", selector: "k1", spf: "mcsv.net", aligned: false},
	{v4: []string{"185.220.", "45.155.", "103.77."}, v6: "2a0e:fd87:a::", dkim: "spoof-relay.ru", selector: "default", spf: "spoof-relay.ru", aligned: false},
}

func (g *generator) record(b []byte) []byte {
	r := g.rnd
	o := g.opts
	s := &senders[r.IntN(len(senders))]
	ip := g.sourceIP(s)

	// Outcome: policy_evaluated dkim/spf, as the reporter aligned them.
	dkim, spf := "fail", "fail"
	forwarded := false
	switch n := r.IntN(100); {
	case !s.aligned: // spoofers and unaligned bulk senders fail both
	case n < 70:
		dkim, spf = "pass", "pass"
	case n < 82:
		dkim, forwarded = "pass", true
	case n < 90:
		spf = "pass"
	}
	pass := dkim == "pass" || spf == "pass"
	disposition := "none"
	if !pass {
		switch n := r.IntN(100); {
		case n < 15:
			disposition = "quarantine"
		case n < 20:
			disposition = "reject"
		}
	} else if o.RFC9990 {
		disposition = "pass"
	}
	count := int64(1 + int(r.ExpFloat64()*6))
	if r.IntN(500) == 0 {
		count = 0 // reporters do send rows of zero messages
	}
	g.stats.Records++
	g.stats.Messages += count
	if pass {
		g.stats.DMARCPass += count
	}

	header := o.Domain
	switch n := r.IntN(10); {
	case n == 0:
		header = "news." + o.Domain
	case n == 1:
		header = "mail." + o.Domain
	}

	b = append(b, "  <record>\n    <row>\n"...)
	b = elem(b, 6, "source_ip", ip)
	b = elem(b, 6, "count", strconv.FormatInt(count, 10))
	b = append(b, "      <policy_evaluated>\n"...)
	b = elem(b, 8, "disposition", disposition)
	b = elem(b, 8, "dkim", dkim)
	b = elem(b, 8, "spf", spf)
	b = g.reason(b, forwarded, disposition)
	b = append(b, "      </policy_evaluated>\n    </row>\n    <identifiers>\n"...)
	if r.IntN(5) == 0 {
		b = elem(b, 6, "envelope_to", []string{"gmail.com", "googlemail.com", "hotmail.com"}[r.IntN(3)])
	}
	envelope := g.domainOf(s.spf, header)
	if r.IntN(8) != 0 {
		b = elem(b, 6, "envelope_from", envelope)
	}
	b = elem(b, 6, "header_from", header)
	b = append(b, "    </identifiers>\n    <auth_results>\n"...)
	b = g.dkimResults(b, s, dkim, header)
	b = g.spfResults(b, s, spf, envelope)
	return append(b, "    </auth_results>\n  </record>\n"...)
}

func (g *generator) sourceIP(s *sender) string {
	r := g.rnd
	switch n := r.IntN(100); {
	case n < 8:
		ips := GeoTestIPs()
		return ips[r.IntN(len(ips))]
	case n < 10:
		return fmt.Sprintf("::ffff:198.51.100.%d", 1+r.IntN(254))
	case n < 25 && s.v6 != "":
		return fmt.Sprintf("%s%x", s.v6, 1+r.IntN(0xfffe))
	}
	p := s.v4[r.IntN(len(s.v4))]
	return p + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(1+r.IntN(254))
}

// domainOf resolves a sender's domain pattern for a message from header.
func (g *generator) domainOf(pattern, header string) string {
	switch pattern {
	case "@":
		if g.rnd.IntN(3) == 0 {
			return "bounces." + g.opts.Domain
		}
		return header
	}
	return pattern
}

func (g *generator) reason(b []byte, forwarded bool, disposition string) []byte {
	r := g.rnd
	var typ, comment string
	switch {
	case forwarded && r.IntN(3) == 0:
		typ = "forwarded"
	case disposition == "none" && r.IntN(40) == 0:
		typ, comment = "local_policy", "arc=pass"
	case disposition == "quarantine" && r.IntN(4) == 0:
		typ, comment = "sampled_out", ""
	default:
		return b
	}
	b = append(b, "        <reason>\n"...)
	b = elem(b, 10, "type", typ)
	if comment != "" {
		b = elem(b, 10, "comment", comment)
	}
	return append(b, "        </reason>\n"...)
}

func (g *generator) dkimResults(b []byte, s *sender, evaluated, header string) []byte {
	r := g.rnd
	n := []int{0, 1, 1, 1, 1, 1, 2, 2, 2, 3}[r.IntN(10)]
	if evaluated == "pass" && n == 0 {
		n = 1
	}
	for i := range n {
		domain, selector, result := g.domainOf(s.dkim, header), s.selector, "pass"
		switch {
		case i == 0 && evaluated == "pass":
			domain = header
		case i == 0:
			if r.IntN(2) == 0 {
				result = []string{"fail", "neutral", "temperror", "permerror"}[r.IntN(4)]
			}
		default:
			_ = r.IntN(4) // the draw of a version that took any of four services: a seed's reports stay the same otherwise
			domain, selector = g.platformDomain(s), "k"+strconv.Itoa(1+i)
		}
		b = append(b, "      <dkim>\n"...)
		b = elem(b, 8, "domain", domain)
		b = elem(b, 8, "selector", selector)
		b = elem(b, 8, "result", result)
		if result != "pass" && r.IntN(2) == 0 {
			b = elem(b, 8, "human_result", "signature verification failed")
		}
		b = append(b, "      </dkim>\n"...)
	}
	return b
}

// platformDomain is the domain of the further signatures of s.
func (g *generator) platformDomain(s *sender) string {
	if s.platform != "" {
		return fmt.Sprintf(s.platform, strings.ReplaceAll(g.opts.Domain, ".", "-"))
	}
	return s.dkim
}

func (g *generator) spfResults(b []byte, s *sender, evaluated, envelope string) []byte {
	r := g.rnd
	result := "pass"
	if evaluated != "pass" {
		result = []string{"fail", "softfail", "neutral", "none", "pass"}[r.IntN(5)]
	}
	if r.IntN(10) == 0 {
		b = append(b, "      <spf>\n"...)
		b = elem(b, 8, "domain", "mail-"+strconv.Itoa(r.IntN(100))+".outbound."+g.domainOf(s.spf, envelope))
		b = elem(b, 8, "scope", "helo")
		b = elem(b, 8, "result", "pass")
		b = append(b, "      </spf>\n"...)
	}
	b = append(b, "      <spf>\n"...)
	b = elem(b, 8, "domain", envelope)
	if r.IntN(5) != 0 {
		b = elem(b, 8, "scope", "mfrom")
	}
	b = elem(b, 8, "result", result)
	return append(b, "      </spf>\n"...)
}
