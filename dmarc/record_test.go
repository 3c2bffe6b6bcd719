package dmarc

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// readRecordLines returns the non-comment lines of testdata/record/name.
func readRecordLines(tb testing.TB, name string) []string {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", "record", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if len(lines) == 0 {
		tb.Fatalf("no records in %s", name)
	}
	return lines
}

func mustParse(tb testing.TB, txt string) *Record {
	tb.Helper()
	r, err := ParseRecord(txt)
	if err != nil {
		tb.Fatalf("ParseRecord(%q): %v", txt, err)
	}
	return r
}

func ptr(s string) *string { return &s }

// TestParseRecordTestdata ensures every sample in testdata/record parses or fails as its file says.
func TestParseRecordTestdata(t *testing.T) {
	for _, txt := range readRecordLines(t, "valid.txt") {
		if _, err := ParseRecord(txt); err != nil {
			t.Errorf("ParseRecord(%q): %v", txt, err)
		}
	}
	for _, txt := range readRecordLines(t, "invalid.txt") {
		r, err := ParseRecord(txt)
		if err == nil {
			t.Errorf("ParseRecord(%q) = %+v, want error", txt, r)
			continue
		}
		var re *RecordError
		if !errors.Is(err, ErrInvalidRecord) || !errors.As(err, &re) || len(re.Problems) == 0 {
			t.Errorf("ParseRecord(%q) error %v is not a RecordError with problems", txt, err)
		}
	}
}

// TestParseRecordEffective ensures defaults and published values of RFC 7489 and RFC 9989 come out right.
func TestParseRecordEffective(t *testing.T) {
	type policy struct {
		P, SP, NP         string
		PCT               int
		ADKIM, ASPF, FO   string
		PSD, T            *string
		RUA, RUF, RUASize []string
	}
	tests := []struct {
		name, txt string
		want      policy
	}{
		{"RFC7489 B.2.1 defaults", "v=DMARC1; p=none; rua=mailto:dmarc-feedback@example.com",
			policy{P: "none", SP: "none", NP: "none", PCT: 100, ADKIM: "r", ASPF: "r", FO: "0",
				RUA: []string{"dmarc-feedback@example.com"}, RUASize: []string{""}}},
		{"RFC7489 B.2.3 size and pct", "v=DMARC1; p=quarantine; rua=mailto:dmarc-feedback@example.com,mailto:tld-test@thirdparty.example.net!10m; pct=25",
			policy{P: "quarantine", SP: "quarantine", NP: "quarantine", PCT: 25, ADKIM: "r", ASPF: "r", FO: "0",
				RUA: []string{"dmarc-feedback@example.com", "tld-test@thirdparty.example.net"}, RUASize: []string{"", "!10m"}}},
		{"sp sets np", "v=DMARC1; p=reject; sp=quarantine; adkim=s; aspf=S; fo=1:D; ruf=mailto:f@example.com",
			policy{P: "reject", SP: "quarantine", NP: "quarantine", PCT: 100, ADKIM: "s", ASPF: "s", FO: "1:d",
				RUF: []string{"f@example.com"}}},
		{"RFC9989 np psd t", "v=DMARC1; p=none; np=reject; psd=N; t=y",
			policy{P: "none", SP: "none", NP: "reject", PCT: 100, ADKIM: "r", ASPF: "r", FO: "0", PSD: ptr("n"), T: ptr("y")}},
		{"RFC9989 absent p with rua", "v=DMARC1; rua=mailto:a@example.com",
			policy{P: "none", SP: "none", NP: "none", PCT: 100, ADKIM: "r", ASPF: "r", FO: "0",
				RUA: []string{"a@example.com"}, RUASize: []string{""}}},
		{"case and blanks", "v = DMARC1 ;P=Reject;  RUA = mailto:Dmarc@Example.COM ;",
			policy{P: "reject", SP: "reject", NP: "reject", PCT: 100, ADKIM: "r", ASPF: "r", FO: "0",
				RUA: []string{"Dmarc@Example.COM"}, RUASize: []string{""}}},
		{"percent-encoded mailto with header", "v=DMARC1; p=none; rua=mailto:dmarc%2Bx@example.com?subject=hi!5k",
			policy{P: "none", SP: "none", NP: "none", PCT: 100, ADKIM: "r", ASPF: "r", FO: "0",
				RUA: []string{"dmarc+x@example.com"}, RUASize: []string{"!5k"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.txt)
			got := policy{P: r.P, SP: r.SP, NP: r.NP, PCT: r.PCT, ADKIM: r.ADKIM, ASPF: r.ASPF, FO: r.FO, PSD: r.PSD, T: r.T}
			for _, u := range r.RUA {
				got.RUA = append(got.RUA, u.Address)
				got.RUASize = append(got.RUASize, u.Size)
			}
			for _, u := range r.RUF {
				got.RUF = append(got.RUF, u.Address)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestParseTags ensures tags are kept as published (order, lower-case names, trimmed values), even around syntax errors.
func TestParseTags(t *testing.T) {
	tags, err := ParseTags("V=DMARC1;  P = reject ; Future = a b ;rua=mailto:a@example.com;")
	if err != nil {
		t.Fatal(err)
	}
	want := []Tag{{"v", "DMARC1"}, {"p", "reject"}, {"future", "a b"}, {"rua", "mailto:a@example.com"}}
	if !slices.Equal(tags, want) {
		t.Errorf("ParseTags = %v, want %v", tags, want)
	}

	tags, err = ParseTags("v=DMARC1; X-Bad=1; p=none; junk")
	var re *RecordError
	if !errors.As(err, &re) || len(re.Problems) != 2 || !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("ParseTags error = %v, want a RecordError with 2 problems", err)
	}
	want = []Tag{{"v", "DMARC1"}, {"p", "none"}}
	if !slices.Equal(tags, want) {
		t.Errorf("ParseTags on a broken record = %v, want %v", tags, want)
	}
}

// TestParseRecordErrors ensures each kind of broken record is refused with a problem naming the cause.
func TestParseRecordErrors(t *testing.T) {
	tests := []struct{ txt, problem string }{
		{"", "must start with v=DMARC1"},
		{"p=none; v=DMARC1", "must start with v=DMARC1"},
		{";v=DMARC1; p=none", "must start with v=DMARC1"},
		{"v=DMARC2; p=none", "exactly DMARC1"},
		{"v=dmarc1; p=none", "exactly DMARC1"},
		{"v=DMARC1", "p is missing and rua has no valid URI"},
		{"v=DMARC1; p=bogus", `p must be one of none, quarantine, reject, not "bogus"`},
		{"v=DMARC1; p=", "p must be one of"},
		{"v=DMARC1; p=none; p=reject", "tag p appears more than once"},
		{"v=DMARC1; v=DMARC1; p=none", "tag v appears more than once"},
		{"v=DMARC1; p=none; sp=all", "sp must be one of"},
		{"v=DMARC1; p=none; np=deny", "np must be one of"},
		{"v=DMARC1; p=none; adkim=strict", "adkim must be one of r, s"},
		{"v=DMARC1; p=none; aspf=x", "aspf must be one of r, s"},
		{"v=DMARC1; p=none; pct=101", "pct must be an integer from 0 to 100"},
		{"v=DMARC1; p=none; pct=-1", "pct must be an integer"},
		{"v=DMARC1; p=none; pct=+5", "pct must be an integer"},
		{"v=DMARC1; p=none; pct=0100", "pct must be an integer"},
		{"v=DMARC1; p=none; fo=2", "fo must be a colon-separated list"},
		{"v=DMARC1; p=none; fo=1:", "fo must be a colon-separated list"},
		{"v=DMARC1; p=none; psd=maybe", "psd must be one of y, n, u"},
		{"v=DMARC1; p=none; t=yes", "t must be one of y, n"},
		{"v=DMARC1; p=none; rua=dmarc@example.com", "(write mailto:dmarc@example.com)"},
		{"v=DMARC1; p=none; rua=", "rua has no URI"},
		{"v=DMARC1; p=none; ruf=mailto:", "has no e-mail address"},
		{"v=DMARC1; p=none; rua=mailto:d@example.com!10x", "bad size suffix"},
		{"v=DMARC1; p=none; rua=mailto:d@example.com,", "empty URI"},
		{"v=DMARC1; p=none; rua=mailto:dmarc", "is not a single e-mail address"},
		{"v=DMARC1; p=none; rua=mailto:a@b@", "invalid mail domain"},
		{"v=DMARC1; p; rua=mailto:d@example.com", `"p" is not a tag=value pair`},
		{"v=DMARC1; p=none; 1x=2", `"1x" is not a valid tag name`},
		{"v=DMARC1; p=none\x01", "outside printable ASCII"},
		{"v=DMARC1 p=none", "exactly DMARC1"},
	}
	for _, tt := range tests {
		_, err := ParseRecord(tt.txt)
		var re *RecordError
		if !errors.As(err, &re) {
			t.Errorf("ParseRecord(%q) error = %v, want *RecordError", tt.txt, err)
			continue
		}
		if !slices.ContainsFunc(re.Problems, func(p string) bool { return strings.Contains(p, tt.problem) }) {
			t.Errorf("ParseRecord(%q) problems %q, want one containing %q", tt.txt, re.Problems, tt.problem)
		}
	}
}

// TestParseRecordWarnings ensures non-fatal findings are reported and clean records carry none.
func TestParseRecordWarnings(t *testing.T) {
	tests := []struct {
		txt  string
		want []string // substrings, each must match one warning
	}{
		{"v=DMARC1; p=reject; rua=mailto:a@example.com", nil},
		{"v=DMARC1; p=none; rua=mailto:a@example.com", []string{"p=none"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com; pct=50", []string{"pct is removed in RFC 9989", "pct=50"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com; rf=afrf; ri=3600", []string{"rf is removed", "ri is removed"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com!10m", []string{"size suffix"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com; foo=bar", []string{"unknown tag foo"}},
		{"v=DMARC1; p=reject", []string{"no rua tag"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com; fo=1", []string{"fo has no effect without ruf"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com; t=y", []string{"t=y: test mode"}},
		{"v=DMARC1; rua=mailto:a@example.com", []string{"p is missing"}},
		{"v=DMARC1; rua=mailto:a@example.com; p=reject", []string{"p is not right after v"}},
		{"v=DMARC1; p=reject; rua=https://r.example.com/x", []string{"not a mailto: URI"}},
		{"  v=DMARC1; p=reject; rua=mailto:a@example.com", []string{"starts with blanks"}},
		{"v=DMARC1; p=reject; rua=mailto:a@example.com; ruf=mailto:a@example.com; fo=0:1:1", []string{"more than once", "combines 0 and 1"}},
	}
	for _, tt := range tests {
		r := mustParse(t, tt.txt)
		for _, w := range tt.want {
			if !slices.ContainsFunc(r.Warnings, func(s string) bool { return strings.Contains(s, w) }) {
				t.Errorf("ParseRecord(%q) warnings %q, want one containing %q", tt.txt, r.Warnings, w)
			}
		}
		if len(r.Warnings) != len(tt.want) {
			t.Errorf("ParseRecord(%q) warnings %q, want %d", tt.txt, r.Warnings, len(tt.want))
		}
	}
}

// TestIsDMARCRecord ensures only TXT strings whose first tag is v=DMARC1 count as DMARC records.
func TestIsDMARCRecord(t *testing.T) {
	tests := []struct {
		txt  string
		want bool
	}{
		{"v=DMARC1; p=none", true},
		{"v=DMARC1", true},
		{"v=DMARC1;", true},
		{"V = DMARC1 ; p=none", true},
		{"\tv=DMARC1;p=none", true},
		{"v=DMARC1 ;", true},
		{"", false},
		{"v=spf1 -all", false},
		{"v=DMARC10; p=none", false},
		{"v=dmarc1; p=none", false},
		{"v=DMARC1 p=none", false},
		{"p=none; v=DMARC1", false},
		{"google-site-verification=abc", false},
		{"vv=DMARC1", false},
		{"v:DMARC1", false},
	}
	for _, tt := range tests {
		if got := IsDMARCRecord(tt.txt); got != tt.want {
			t.Errorf("IsDMARCRecord(%q) = %v, want %v", tt.txt, got, tt.want)
		}
	}
}

// TestRecordString ensures rendering keeps the published tag order and re-parses to the same tags.
func TestRecordString(t *testing.T) {
	r := mustParse(t, "v = DMARC1 ;P=reject;  rua = mailto:a@example.com , mailto:b@example.com!1m ; zz=1;")
	want := "v=DMARC1; p=reject; rua=mailto:a@example.com , mailto:b@example.com!1m; zz=1"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	again := mustParse(t, r.String())
	if !slices.Equal(again.Tags, r.Tags) {
		t.Errorf("re-parsed tags %v, want %v", again.Tags, r.Tags)
	}
}

// TestRecordGet ensures Get finds published tags case-insensitively and reports absent ones.
func TestRecordGet(t *testing.T) {
	r := mustParse(t, "v=DMARC1; p=reject; rua=mailto:a@example.com")
	if v, ok := r.Get("P"); !ok || v != "reject" {
		t.Errorf(`Get("P") = %q, %v`, v, ok)
	}
	if v, ok := r.Get("sp"); ok || v != "" {
		t.Errorf(`Get("sp") = %q, %v; want absent`, v, ok)
	}
}

// TestHasReportingAddress ensures rua matching ignores case and size suffixes and only counts mailto in rua.
func TestHasReportingAddress(t *testing.T) {
	r := mustParse(t, "v=DMARC1; p=none; rua=mailto:Other@example.com,mailto:D7K2@Reports.Example.NET!10m; ruf=mailto:ruf@example.com")
	for addr, want := range map[string]bool{
		"d7k2@reports.example.net":   true,
		"other@example.com":          true,
		"ruf@example.com":            false,
		"d7k2@reports.example.net.x": false,
		"":                           false,
	} {
		if got := r.HasReportingAddress(addr); got != want {
			t.Errorf("HasReportingAddress(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestDefaultRecord ensures the suggested record is valid, monitoring only, and reports to the address.
func TestDefaultRecord(t *testing.T) {
	txt := DefaultRecord("d7k2m9xq4p@reports.example.net")
	want := "v=DMARC1; p=none; rua=mailto:d7k2m9xq4p@reports.example.net; ruf=mailto:d7k2m9xq4p@reports.example.net; fo=1"
	if txt != want {
		t.Fatalf("DefaultRecord = %q, want %q", txt, want)
	}
	r := mustParse(t, txt)
	if !r.HasReportingAddress("d7k2m9xq4p@reports.example.net") || r.P != "none" || r.FO != "1" {
		t.Errorf("DefaultRecord parses to %+v", r)
	}
}

// TestWithReportingAddress ensures the suggestion keeps every tag and only adds the address where missing.
func TestWithReportingAddress(t *testing.T) {
	const addr = "d7k2@reports.example.net"
	tests := []struct{ in, want string }{
		{"v=DMARC1; p=reject; sp=quarantine; pct=50",
			"v=DMARC1; p=reject; sp=quarantine; pct=50; rua=mailto:d7k2@reports.example.net; ruf=mailto:d7k2@reports.example.net"},
		{"v=DMARC1; p=quarantine; rua=mailto:own@example.com; adkim=s",
			"v=DMARC1; p=quarantine; rua=mailto:own@example.com,mailto:d7k2@reports.example.net; adkim=s; ruf=mailto:d7k2@reports.example.net"},
		{"v=DMARC1; p=reject; rua=mailto:D7K2@reports.example.net!10m; ruf=mailto:own@example.com; fo=1",
			"v=DMARC1; p=reject; rua=mailto:D7K2@reports.example.net!10m; ruf=mailto:own@example.com,mailto:d7k2@reports.example.net; fo=1"},
		{"v=DMARC1; p=none; rua=mailto:d7k2@reports.example.net; ruf=mailto:d7k2@reports.example.net",
			"v=DMARC1; p=none; rua=mailto:d7k2@reports.example.net; ruf=mailto:d7k2@reports.example.net"},
	}
	for _, tt := range tests {
		r := mustParse(t, tt.in)
		got := r.WithReportingAddress(addr)
		if got != tt.want {
			t.Errorf("WithReportingAddress(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
		after := mustParse(t, got)
		if after.P != r.P || after.SP != r.SP || after.PCT != r.PCT || !after.HasReportingAddress(addr) {
			t.Errorf("WithReportingAddress(%q) weakened or missed: %+v", tt.in, after)
		}
		if len(r.Tags) != 0 && r.Tags[0] != (Tag{"v", "DMARC1"}) {
			t.Errorf("input record tags changed: %v", r.Tags)
		}
	}
}

// BenchmarkParseRecord measures parsing of the valid sample records.
func BenchmarkParseRecord(b *testing.B) {
	records := readRecordLines(b, "valid.txt")
	b.ReportAllocs()
	for b.Loop() {
		for _, txt := range records {
			if _, err := ParseRecord(txt); err != nil {
				b.Fatal(err)
			}
		}
	}
}
