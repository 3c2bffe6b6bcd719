package tlsrpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// The first implementation of parseJSON (encoding/json after a pass for
// the limits), kept as the reference the hand-written decoder is tested
// against (TestDecodeMatchesReference).

func parseJSONStd(data []byte, lim Limits) (*Report, error) {
	lim = lim.withDefaults()
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if err := scan(data, lim); err != nil {
		return nil, err
	}
	var raw rawReport
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, malformed("%s: a JSON %s where the schema wants a %s", fieldName(te), te.Value, typeName(te.Type.Kind().String()))
		}
		return nil, malformed("%v", err)
	}
	return raw.convert(lim)
}

func fieldName(te *json.UnmarshalTypeError) string {
	if te.Field == "" {
		return "report"
	}
	return te.Field
}

func typeName(kind string) string {
	switch kind {
	case "ptr", "struct", "map":
		return "object"
	case "slice":
		return "array"
	case "int64", "float64":
		return "number"
	}
	return kind
}

// scan walks data once, before any decoding, refusing nesting deeper than
// lim.MaxDepth and arrays longer than lim.MaxArray, so that the decoder
// never builds what the limits forbid. Syntax errors are left to the
// decoder, which words them better.
func scan(data []byte, lim Limits) error {
	// elems[d] counts the elements of the array open at depth d+1 (-1 for
	// an object); the stack never grows past MaxDepth.
	elems := make([]int, 0, lim.MaxDepth)
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			if n := len(elems); n > 0 && elems[n-1] == 0 {
				elems[n-1] = 1
			}
		case '{', '[':
			if n := len(elems); n > 0 && elems[n-1] == 0 {
				elems[n-1] = 1
			}
			if len(elems) == lim.MaxDepth {
				return tooLarge("nesting deeper than %d levels", lim.MaxDepth)
			}
			if c == '{' {
				elems = append(elems, -1)
			} else {
				elems = append(elems, 0)
			}
		case '}', ']':
			if len(elems) > 0 {
				elems = elems[:len(elems)-1]
			}
		case ',':
			if n := len(elems); n > 0 && elems[n-1] > 0 {
				if elems[n-1]++; elems[n-1] > lim.MaxArray {
					return tooLarge("an array of more than %d elements", lim.MaxArray)
				}
			}
		case ' ', '\t', '\r', '\n', ':':
		default:
			if n := len(elems); n > 0 && elems[n-1] == 0 {
				elems[n-1] = 1
			}
		}
	}
	return nil
}

// BenchmarkParseReference is BenchmarkParse with the encoding/json
// reference: the baseline of the decoder (bench/run.sh tls).
func BenchmarkParseReference(b *testing.B) {
	raw := readTestdata(b, "microsoft.json")
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseJSONStd(raw, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
