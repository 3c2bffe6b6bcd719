package metrics

import (
	"strings"
	"testing"
)

// TestInfo ensures an info metric is a gauge of 1 with escaped labels.
func TestInfo(t *testing.T) {
	r := NewRegistry()
	r.Info("x_build_info", "Build.", "version", `v1 "q"`, "revision", "abc")
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "# HELP x_build_info Build.\n# TYPE x_build_info gauge\nx_build_info{version=\"v1 \\\"q\\\"\",revision=\"abc\"} 1\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
