// Package metrics keeps counters, gauges and histograms in memory and writes
// them in the Prometheus text exposition format (version 0.0.4).
//
// It is deliberately small: dmarcd needs a handful of series, not a client
// library, and every dependency must earn its place. Series are looked up by
// their label values once and then updated with atomics, so the hot path of a
// request costs a map read and an atomic add.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds every metric family of a process. The zero value is not
// usable; call NewRegistry.
type Registry struct {
	mu       sync.Mutex
	families []family
	names    map[string]bool
}

type family interface {
	name() string
	write(w *bufio.Writer)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{names: map[string]bool{}}
}

func (r *Registry) add(f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[f.name()] {
		panic("metrics: duplicate metric " + f.name())
	}
	r.names[f.name()] = true
	r.families = append(r.families, f)
}

// WriteText writes every family in the text exposition format, sorted by name.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	fams := append([]family(nil), r.families...)
	r.mu.Unlock()
	sort.Slice(fams, func(i, j int) bool { return fams[i].name() < fams[j].name() })
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		f.write(bw)
	}
	return bw.Flush()
}

// Handler serves the registry at any path.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = r.WriteText(w)
	})
}

// vec maps label values to one series. Series are created on first use and
// never removed, so label values must come from small, fixed sets (routes,
// status codes, outcomes), never from user input.
type vec[T any] struct {
	fname, help, kind string
	labels            []string
	newSeries         func() *T
	m                 sync.Map // joined label values -> *T
	mu                sync.Mutex
	keys              []string
}

func (v *vec[T]) name() string { return v.fname }

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s wants %d label values, got %d", v.fname, len(v.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	if s, ok := v.m.Load(key); ok {
		return s.(*T)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.m.Load(key); ok {
		return s.(*T)
	}
	s := v.newSeries()
	v.m.Store(key, s)
	v.keys = append(v.keys, key)
	return s
}

// each calls fn for every series in a stable order.
func (v *vec[T]) each(fn func(labels string, s *T)) {
	v.mu.Lock()
	keys := append([]string(nil), v.keys...)
	v.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		s, _ := v.m.Load(k)
		fn(v.labelText(k), s.(*T))
	}
}

func (v *vec[T]) labelText(key string) string {
	if len(v.labels) == 0 {
		return ""
	}
	values := strings.Split(key, "\xff")
	var b strings.Builder
	for i, l := range v.labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(values[i]))
		b.WriteByte('"')
	}
	return b.String()
}

func (v *vec[T]) header(w *bufio.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", v.fname, v.help, v.fname, v.kind)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

func braces(labels, extra string) string {
	switch {
	case labels == "" && extra == "":
		return ""
	case labels == "":
		return "{" + extra + "}"
	case extra == "":
		return "{" + labels + "}"
	}
	return "{" + labels + "," + extra + "}"
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Counter is a monotonically increasing count.
type Counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value returns the current count.
func (c *Counter) Value() uint64 { return c.n.Load() }

// CounterVec is a family of counters told apart by label values.
type CounterVec struct{ v *vec[Counter] }

// Counter registers a counter family. It panics on a duplicate name, which
// is a programming error.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{&vec[Counter]{fname: name, help: help, kind: "counter", labels: labels,
		newSeries: func() *Counter { return new(Counter) }}}
	r.add(c)
	return c
}

// With returns the counter for these label values, in the order the labels
// were declared.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values) }

func (c *CounterVec) name() string { return c.v.fname }

func (c *CounterVec) write(w *bufio.Writer) {
	c.v.header(w)
	c.v.each(func(labels string, s *Counter) {
		fmt.Fprintf(w, "%s%s %d\n", c.v.fname, braces(labels, ""), s.Value())
	})
}

// GaugeFunc registers a gauge whose value is read from fn at scrape time,
// for quantities the process already knows (queue depth, open connections).
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	r.add(&gaugeFunc{fname: name, help: help, fn: fn})
}

// CounterFunc registers a counter whose value is read from fn at scrape
// time, for counts another package keeps; fn must never decrease.
func (r *Registry) CounterFunc(name, help string, fn func() float64) {
	r.add(&gaugeFunc{fname: name, help: help, fn: fn, kind: "counter"})
}

type gaugeFunc struct {
	fname, help string
	fn          func() float64
	kind        string // "gauge" when empty
}

func (g *gaugeFunc) name() string { return g.fname }

func (g *gaugeFunc) write(w *bufio.Writer) {
	kind := g.kind
	if kind == "" {
		kind = "gauge"
	}
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", g.fname, g.help, g.fname, kind, g.fname, formatFloat(g.fn()))
}

// DefaultLatencyBuckets are request-latency bucket bounds in seconds, from
// 0.5 ms to 10 s.
var DefaultLatencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // one per bound, plus +Inf
	sum    atomic.Uint64   // float64 bits
	count  atomic.Uint64
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Count returns how many values were observed.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// HistogramVec is a family of histograms told apart by label values.
type HistogramVec struct{ v *vec[Histogram] }

// Histogram registers a histogram family with the given upper bounds
// (sorted ascending; +Inf is implied).
func (r *Registry) Histogram(name, help string, bounds []float64, labels ...string) *HistogramVec {
	bounds = append([]float64(nil), bounds...)
	sort.Float64s(bounds)
	h := &HistogramVec{&vec[Histogram]{fname: name, help: help, kind: "histogram", labels: labels,
		newSeries: func() *Histogram {
			return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
		}}}
	r.add(h)
	return h
}

// With returns the histogram for these label values.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values) }

func (h *HistogramVec) name() string { return h.v.fname }

func (h *HistogramVec) write(w *bufio.Writer) {
	h.v.header(w)
	n := h.v.fname
	h.v.each(func(labels string, s *Histogram) {
		var cum uint64
		for i, b := range s.bounds {
			cum += s.counts[i].Load()
			fmt.Fprintf(w, "%s_bucket%s %d\n", n, braces(labels, `le="`+formatFloat(b)+`"`), cum)
		}
		cum += s.counts[len(s.bounds)].Load()
		fmt.Fprintf(w, "%s_bucket%s %d\n", n, braces(labels, `le="+Inf"`), cum)
		fmt.Fprintf(w, "%s_sum%s %s\n", n, braces(labels, ""), formatFloat(math.Float64frombits(s.sum.Load())))
		fmt.Fprintf(w, "%s_count%s %d\n", n, braces(labels, ""), cum)
	})
}
