package aggregate

import (
	"bytes"
	"reflect"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/dmarcd/dmarcd/dmarc/container"

	"github.com/dmarcd/dmarcd/internal/reportgen"
)

// aggFuzzLimits keeps fuzz inputs from spending time on huge outputs.
var aggFuzzLimits = container.Limits{MaxRecords: 1000, MaxDecompressed: 1 << 20}

// FuzzAggregate is a differential test: on every input encoding/xml
// accepts (and that aggRefComparable does not set aside), the streaming
// reader must agree with the encoding/xml reference on the header, the
// records and the skipped count. On any input it must not panic, must
// return only classified errors and valid UTF-8 strings, and must give
// the same result when its input arrives one byte per Read.
// Seeds: testdata/fuzz/FuzzAggregate (from the corpus) and a few here.
func FuzzAggregate(f *testing.F) {
	f.Add([]byte(aggDoc("", "", aggRec("192.0.2.1", "1", ""))))
	f.Add(reportgen.Generate(1, 3, reportgen.Options{}))
	f.Add(reportgen.Generate(2, 2, reportgen.Options{RFC9990: true}))
	f.Add([]byte(`<a:feedback xmlns:a="x"><a:report_metadata><a:org_name>&lt;&#65;<![CDATA[x]]></a:org_name></a:report_metadata></a:feedback>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := aggStreamParse(bytes.NewReader(data), aggFuzzLimits)
		if err != nil && !aggIsSentinel(err) {
			t.Fatalf("unclassified error: %v", err)
		}
		if err == nil {
			aggCheckUTF8(t, got)
		}
		// Refills at every byte must not change anything.
		got1, err1 := aggStreamParse(iotest.OneByteReader(bytes.NewReader(data)), aggFuzzLimits)
		if !reflect.DeepEqual(got, got1) || (err == nil) != (err1 == nil) || err != nil && err.Error() != err1.Error() {
			t.Fatalf("one byte at a time: %v / %v, results differ: %v", err, err1, !reflect.DeepEqual(got, got1))
		}
		ref, refErr := aggRefParse(bytes.NewReader(data), aggFuzzLimits)
		if refErr != nil || !aggRefComparable(data, err) {
			return
		}
		if err != nil {
			t.Fatalf("encoding/xml reads it, we refuse: %v", err)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("streaming and reference differ:\n got %+v %+v\nwant %+v %+v", got.Header, got.Records, ref.Header, ref.Records)
		}
	})
}

// aggCheckUTF8 fails if any string of the result is not valid UTF-8.
func aggCheckUTF8(t *testing.T, r *aggRefResult) {
	t.Helper()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			if !utf8.ValidString(v.String()) {
				t.Fatalf("invalid UTF-8 %q", v.String())
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(r))
}

// TestAggRefComparable ensures the fuzz test sets aside exactly the inputs
// on which the two decoders differ on purpose.
func TestAggRefComparable(t *testing.T) {
	for in, want := range map[string]bool{
		`<feedback/>`:                                  true,
		`<?xml version="1.0"?><feedback/>`:             true,
		"\n <?xml version=\"1.0\"?><feedback/>":        true,
		`<feedback><?xml encoding="x"?></feedback>`:    false,
		"\xEF\xBB\xBF<feedback/>":                      false,
		`<feedback><!-- c --><![CDATA[x]]></feedback>`: true,
		`<feedback><!ENTITY x "y"></feedback>`:         false,
	} {
		if got := aggRefComparable([]byte(in), nil); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
	if aggRefComparable([]byte("<feedback/>"), aggErrString("dmarc: XML nested deeper than 256")) {
		t.Error("nesting error not set aside")
	}
}

type aggErrString string

func (e aggErrString) Error() string { return string(e) }
