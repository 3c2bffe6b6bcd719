package web_test

import (
	"encoding/xml"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store/storetest"
)

// svgNode is an element of a parsed SVG.
type svgNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []svgNode  `xml:",any"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// walk calls fn for n and every element under it, in document order.
func (n svgNode) walk(fn func(svgNode)) {
	fn(n)
	for _, c := range n.Children {
		c.walk(fn)
	}
}

// charts parses every chart SVG of a page.
func charts(t *testing.T, body string) []svgNode {
	t.Helper()
	var out []svgNode
	for rest := body; ; {
		i := strings.Index(rest, `<svg class="chart"`)
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatal("an unclosed chart svg")
		}
		var n svgNode
		if err := xml.Unmarshal([]byte(rest[i:i+j+len("</svg>")]), &n); err != nil {
			t.Fatalf("a chart is no well-formed SVG: %v", err)
		}
		out = append(out, n)
		rest = rest[i+j:]
	}
}

// percent reads a coordinate written as a share of the chart ("12.5%").
func percent(t *testing.T, v string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || !strings.HasSuffix(v, "%") {
		t.Fatalf("coordinate %q is not a percentage", v)
	}
	return f
}

// axisValue reads a y-axis label: 250, 1.5k, 20k, 2M.
func axisValue(t *testing.T, s string) float64 {
	t.Helper()
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("axis label %q is no number", s)
	}
	return f * mult
}

// TestChartsHaveAYAxisAndUnscaledText parses the daily and stacked
// charts of the overview and a domain page: each has a y-axis of round
// values, increasing upwards, each with its grid line, whose top value
// bounds the largest day; a bar's height is its count on that scale (so
// the labels tell what the bars mean); and the charts are drawn in
// shares of their width and height rather than in a viewBox that would
// shrink their text with the picture on a phone.
func TestChartsHaveAYAxisAndUnscaledText(t *testing.T) {
	e := newEnv(t)
	day := storetest.Epoch().Truncate(24 * time.Hour)
	counts := []int64{1200, 300, 2350}
	for i, n := range counts {
		recs := goodRecords()
		recs[0].Count, recs[1].Count = n-n/10, n/10
		mustReport(t, e.db, e.domA, day.AddDate(0, 0, -(i+1)), "google.com", recs)
	}
	cookie := e.signIn(e.readA)
	for _, path := range []string{"/", "/domains/" + e.domA.ID} {
		body := e.send("GET", path, cookie, nil).body
		svgs := charts(t, body)
		if len(svgs) == 0 {
			t.Fatalf("%s: no chart", path)
		}
		for k, svg := range svgs {
			if svg.attr("viewBox") != "" {
				t.Errorf("%s chart %d: a viewBox scales its labels with the picture", path, k)
			}
			var labels []svgNode
			grid := map[string]bool{}
			var bars []svgNode
			svg.walk(func(n svgNode) {
				switch {
				case n.XMLName.Local == "text" && n.attr("class") == "axis":
					labels = append(labels, n)
				case n.XMLName.Local == "line" && n.attr("class") == "grid":
					grid[n.attr("y1")] = true
				case n.XMLName.Local == "rect":
					bars = append(bars, n)
				}
			})
			if len(labels) < 2 || len(labels) > 6 {
				t.Fatalf("%s chart %d: %d y-axis labels, want 2 to 6", path, k, len(labels))
			}
			prevY, prevV := 101.0, 0.0
			for _, l := range labels {
				y, v := percent(t, l.attr("y")), axisValue(t, strings.TrimSpace(l.Text))
				if y >= prevY || v <= prevV {
					t.Errorf("%s chart %d: label %q at %.1f%% does not rise above the one before", path, k, l.Text, y)
				}
				if !grid[l.attr("y")] {
					t.Errorf("%s chart %d: label %q has no grid line at %s", path, k, l.Text, l.attr("y"))
				}
				prevY, prevV = y, v
			}
			top, topY := prevV, prevY
			if top < 2350 || top > 2*2350 {
				t.Errorf("%s chart %d: the axis tops at %v for days of at most 2350", path, k, top)
			}
			// The base line is where a 0 would be: two labels fix the scale.
			y0, v0 := percent(t, labels[0].attr("y")), axisValue(t, labels[0].Text)
			perUnit := (y0 - topY) / (top - v0)
			base := y0 + v0*perUnit
			// The tallest day's bars reach 2350 on that scale.
			minY := 100.0
			for _, b := range bars {
				if b.attr("height") != "" && percent(t, b.attr("height")) > 0 {
					minY = min(minY, percent(t, b.attr("y")))
				}
				if b.attr("x") != "" {
					percent(t, b.attr("x"))
					percent(t, b.attr("width"))
				}
			}
			if got := (base - minY) / perUnit; got < 2350*0.99 || got > 2350*1.01 {
				t.Errorf("%s chart %d: the tallest bar reads %.0f on its axis, want 2350", path, k, got)
			}
		}
	}
}
