package reports

import (
	"fmt"
	"reflect"
	"testing"
)

// TestFailureDayCodec ensures a roll-up reads back as written and that a
// truncated one is refused.
func TestFailureDayCodec(t *testing.T) {
	f := NewFailureDay()
	r := &FailureReport{SourceIP: new("192.0.2.1"), Geo: &Geo{CountryCode: new("GB"), CountryName: new("United Kingdom"), ASN: new(uint32(1)), ASOrg: new("x")}}
	f.Add(r, failDMARC|failDKIM, 1)
	f.Add(&FailureReport{}, failSPF, 1)
	raw := AppendFailureDay(nil, f)
	got, err := DecodeFailureDay(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.total != 2 || got.auth != [3]int64{1, 1, 1} || len(got.countries) != 2 || len(got.asns) != 2 || got.sources["192.0.2.1"].n != 1 {
		t.Errorf("decoded %+v", got)
	}
	for i := range raw {
		if _, err := DecodeFailureDay(raw[:i]); err == nil {
			t.Fatalf("a roll-up cut at %d bytes decodes", i)
		}
	}
}

// TestCutTo ensures text is cut at a character boundary, as close to the
// limit as that allows, and comes out valid UTF-8.
func TestCutTo(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"€€€", 7, "€€"},
		{"€€€", 6, "€€"},
		{"é€", 4, "é"},
		{"€", 2, ""},
		{"a\xffb", 5, "a\uFFFDb"},
	} {
		if got := cutTo(c.in, c.n); got != c.want {
			t.Errorf("cutTo(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// TestTopFailSources ensures the selection of the busiest sources agrees
// with sorting them all: most reports first, ties by IP.
func TestTopFailSources(t *testing.T) {
	sources := map[string]*failSource{}
	for i := range 500 {
		sources[fmt.Sprintf("10.0.%d.%d", i/200, i%200)] = &failSource{n: int64(i*7919%13 + 1)}
	}
	f := &FailureDay{sources: sources}
	for _, n := range []int{1, 10, 499, 500, 600} {
		got, want := topFailSources(sources, n), f.topSources(n)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("top %d: %v\nwant %v", n, got[:min(len(got), 5)], want[:min(len(want), 5)])
		}
	}
	if got := topFailSources(nil, 10); len(got) != 0 {
		t.Errorf("no sources: %v", got)
	}
}
