package metrics

import (
	"bufio"
	"fmt"
	"strings"
)

// Info registers a gauge of constant value 1 whose labels carry facts about
// the process (the Prometheus "info" idiom, e.g. dmarcd_build_info).
// labels are name, value pairs; an odd count panics.
func (r *Registry) Info(name, help string, labels ...string) {
	if len(labels)%2 != 0 {
		panic("metrics: Info labels must be name, value pairs")
	}
	var b strings.Builder
	for i := 0; i < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%s="%s"`, labels[i], escapeLabel(labels[i+1]))
	}
	r.add(&info{fname: name, help: help, labels: b.String()})
}

type info struct{ fname, help, labels string }

func (i *info) name() string { return i.fname }

func (i *info) write(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s%s 1\n", i.fname, i.help, i.fname, i.fname, braces(i.labels, ""))
}
