package tlsrpt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// decodeCases are inputs the decoder and the encoding/json reference must
// read alike: the testdata reports, and the JSON corners real reporters
// hit (escapes, surrogates, invalid UTF-8, exponents, nulls, unknown
// members at any depth, a byte order mark).
func decodeCases(t testing.TB) [][]byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	g := string(out[0])
	for _, v := range []string{
		strings.Replace(g, `"Google Inc."`, `"Goo\"gle\\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \ud800 \udc00x \u0041"`, 1),
		strings.Replace(g, `"Google Inc."`, "\"G\xffoo\xc3\x28gle \xe2\x82\xac\"", 1),
		strings.Replace(g, `1200`, `1.2e3`, 1),
		strings.Replace(g, `1200`, `12000E-1`, 1),
		strings.Replace(g, `1200`, `-0`, 1),
		strings.Replace(g, `"policies":[`, `"x":{"a":[1,true,false,null,{"b":"c"}],"d":-1.5e+2},"policies":[`, 1),
		strings.Replace(g, `"summary":{`, `"summary":{"other":[[]],`, 1),
		strings.Replace(g, `"policy-domain":"example.com"`, `"policy-domain":"example.com","mx-host":"mx.example.com"`, 1),
		strings.Replace(g, `"policy-domain":"example.com"`, `"policy-domain":"example.com","mx-host":[null,"a",null]`, 1),
		strings.Replace(g, `"failure-details":[`, `"failure-details":[null,`, 1),
		strings.Replace(g, `"contact-info":"smtp-tls-reporting@google.com"`, `"contact-info":null`, 1),
		strings.ReplaceAll(g, `,`, " ,\r\n\t "),
		"\xef\xbb\xbf \n" + g + "\n ",
		`null`, `[]`, `"x"`, `12`, `true`, `{}`, `{"policies":null}`, ``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`,
		`{"organization-name":"o","report-id":"r","date-range":null}`,
		`{"organization-name":01}`, `{"organization-name":1.}`, `{"organization-name":1e}`, `{"organization-name":-}`,
		`{"organization-name":"a` + "\x01" + `"}`, `{"organization-name":"\x"}`, `{"organization-name":"\u12"}`,
		`{"organization-name":tru}`, `{"organization-name":nul}`, `{"organization-name":"o"} x`,
	} {
		out = append(out, []byte(v))
	}
	return out
}

// TestDecodeMatchesReference ensures the hand-written decoder reads every
// case as encoding/json did: the same report, or an error for both.
func TestDecodeMatchesReference(t *testing.T) {
	for _, in := range decodeCases(t) {
		compareDecoders(t, in)
	}
}

func compareDecoders(t *testing.T, in []byte) {
	t.Helper()
	got, err := parseBytes(in, Limits{})
	want, werr := parseJSONStd(in, Limits{})
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q:\n decoder   %+v, %v\n reference %+v, %v", in, got, err, want, werr)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("%q: error %v is not ErrMalformed", in, err)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n decoder   %+v\n reference %+v", in, got, want)
	}
}

// FuzzDecodeMatchesReference compares the decoder with the reference on
// any input whose member names are written as RFC 8460 spells them (the
// reference also matched names without case, on purpose no longer
// done): both refuse it, or both read the same report.
func FuzzDecodeMatchesReference(f *testing.F) {
	for _, in := range decodeCases(f) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if bytes.ContainsAny(in, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") || bytes.Contains(in, []byte(`\u`)) {
			return // names may differ in case, or be escaped into other case
		}
		compareDecoders(t, in)
	})
}
