package web

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dmarcd/dmarcd/store"
)

// The charts are inline SVG drawn here from the roll-ups: bars as numbers,
// labels as text the template escapes, and a <title> per bar for hover and
// screen readers. Each chart comes with a table fallback in the page.
//
// Coordinates are shares of the chart's width and height (percentages),
// not units of a viewBox: the SVG fills its box at any width, and its text
// keeps its CSS size (12 px) on a phone instead of shrinking with the
// picture, as it did in a 720-unit viewBox drawn 340 px wide. A y-axis of
// round values, each with a grid line, says what the bars count.

// barChart is a daily stacked pass/fail bar chart.
type barChart struct {
	H     int // height in CSS pixels
	Bars  []bar
	Max   int64
	Grid  []gridLine
	Ticks []tick
	Empty bool
}

// bar is one day; X, W, Y and H are percentages of the chart's box.
type bar struct {
	X, W              float64
	PassY, PassH      float64
	FailY, FailH      float64
	Date              string
	Pass, Fail, Total int64
}

// tick is a date under the bars, at X percent of the width.
type tick struct {
	X      float64
	Label  string
	Anchor string // SVG text-anchor: the first label starts, the last ends, at its bar
}

// gridLine is a value of the y-axis: a line across the chart at Y percent
// of its height, labelled.
type gridLine struct {
	Y     float64
	Label string
}

const (
	chartH = 200 // CSS pixels, the CSS's height of .chart (160 on a phone)
	// The plot's top and base line, as percentages of the height: room
	// above for the top label, below for the dates.
	chartTop  = 9.0
	chartBase = 86.0
)

// axis is a y-axis for values up to max: a round step (1, 2 or 5 times a
// power of ten, at least 1) giving 2 to 4 lines, and the value at the top
// of the plot, the last line's.
func axis(max int64) (step, top int64) {
	if max <= 0 {
		return 1, 1
	}
	raw := float64(max) / 3
	step = 1
	for mag := int64(1); ; mag *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if step = m * mag; float64(step) >= raw {
				top = (max + step - 1) / step * step
				return step, top
			}
		}
	}
}

// grid draws the lines of the axis: the base line (0, not labelled) and
// one per step up to top.
func grid(step, top int64) []gridLine {
	g := []gridLine{{Y: chartBase}}
	for v := step; v <= top; v += step {
		g = append(g, gridLine{Y: plotY(v, top), Label: compactNum(v)})
	}
	return g
}

// plotY is where value v of a plot topping at top stands, as a percentage.
func plotY(v, top int64) float64 {
	return chartBase - (chartBase-chartTop)*float64(v)/float64(top)
}

// plotH is the height of value v of a plot topping at top.
func plotH(v, top int64) float64 { return (chartBase - chartTop) * float64(v) / float64(top) }

// compactNum writes an axis value short: 250, 1.5k, 20k, 2M.
func compactNum(v int64) string {
	f := func(x float64, unit string) string {
		return strings.TrimSuffix(strings.TrimSuffix(strconv.FormatFloat(x, 'f', 1, 64), "0"), ".") + unit
	}
	switch {
	case v >= 1_000_000:
		return f(float64(v)/1e6, "M")
	case v >= 1000:
		return f(float64(v)/1e3, "k")
	}
	return strconv.FormatInt(v, 10)
}

// dateTicks labels the first, the middle (of more than 10) and the last
// of n bars starting at x with width w (percentages).
func dateTicks(n, i int, date string, x, w float64, ticks []tick) []tick {
	switch {
	case i == 0:
		return append(ticks, tick{X: x, Label: shortDate(date), Anchor: "start"})
	case i == n-1:
		return append(ticks, tick{X: x + w, Label: shortDate(date), Anchor: "end"})
	case n > 10 && i == n/2:
		return append(ticks, tick{X: x + w/2, Label: shortDate(date), Anchor: "middle"})
	}
	return ticks
}

// dailyChart draws days (oldest first).
func dailyChart(days []store.DayStats) barChart {
	c := barChart{H: chartH, Empty: true}
	for _, d := range days {
		c.Max = max(c.Max, d.Messages)
		if d.Messages > 0 {
			c.Empty = false
		}
	}
	if len(days) == 0 {
		return c
	}
	step, top := axis(c.Max)
	c.Grid = grid(step, top)
	slot := 100 / float64(len(days))
	for i, d := range days {
		b := bar{X: float64(i)*slot + slot*0.1, W: slot * 0.8, Date: d.Date,
			Pass: d.DMARCPass, Fail: d.DMARCFail, Total: d.Messages}
		b.PassH, b.FailH = plotH(d.DMARCPass, top), plotH(d.DMARCFail, top)
		b.PassY = chartBase - b.PassH
		b.FailY = b.PassY - b.FailH
		c.Bars = append(c.Bars, b)
		c.Ticks = dateTicks(len(days), i, d.Date, b.X, b.W, c.Ticks)
	}
	return c
}

// shortDate turns 2026-11-20 into 11-20.
func shortDate(d string) string {
	if len(d) == 10 {
		return d[5:]
	}
	return d
}

// sparkline is a domain's 30-day pass-rate trend as a polyline.
type sparkline struct {
	Points string
	Title  string
	Empty  bool
}

func trend(days []store.DayStats) sparkline {
	const w, h = 90.0, 20.0
	s := sparkline{Empty: true}
	n := len(days)
	if n < 2 {
		return s
	}
	for i, d := range days {
		if d.Messages == 0 {
			continue
		}
		s.Empty = false
		rate := float64(d.DMARCPass) / float64(d.Messages)
		if s.Points != "" {
			s.Points += " "
		}
		s.Points += fmt.Sprintf("%.1f,%.1f", w*float64(i)/float64(n-1), 1+(h-2)*(1-rate))
	}
	s.Title = fmt.Sprintf("daily DMARC pass rate over %d days", n)
	return s
}

// shareBar is a horizontal bar split into parts (dispositions).
type shareBar struct {
	Parts []sharePart
	Total int64
}

type sharePart struct {
	Label, Class string
	N            int64
	X, W         float64 // percent of the width
}

func shares(parts ...sharePart) shareBar {
	var s shareBar
	for _, p := range parts {
		s.Total += p.N
	}
	x := 0.0
	for _, p := range parts {
		if s.Total > 0 {
			p.W = 100 * float64(p.N) / float64(s.Total)
		}
		p.X = x
		x += p.W
		s.Parts = append(s.Parts, p)
	}
	return s
}

// stackChart is a daily stacked bar chart of several series (the
// disposition and TLS session charts); dailyChart's pass/fail is its
// two-series case, kept apart for its established markup.
type stackChart struct {
	H      int
	Bars   []stackBar
	Max    int64
	Grid   []gridLine
	Ticks  []tick
	Empty  bool
	Series []seriesKey
	Label  string // what the chart shows, for its title and aria-label
}

// seriesKey names one series: its CSS class and its label.
type seriesKey struct{ Class, Label string }

type stackBar struct {
	Date  string
	Title string // "2026-11-20: 3 none, 1 reject"
	Rects []stackRect
}

// stackRect is one series of a bar, in percentages of the chart's box.
type stackRect struct {
	Class      string
	X, Y, W, H float64
}

// stackedChart draws one bar per day (oldest first) of the values of each
// series (values[i][s] is day i's value of series s).
func stackedChart(label string, series []seriesKey, dates []string, values [][]int64) stackChart {
	c := stackChart{H: chartH, Empty: true, Series: series, Label: label}
	for _, v := range values {
		var sum int64
		for _, n := range v {
			sum += n
		}
		c.Max = max(c.Max, sum)
	}
	c.Empty = c.Max == 0
	if len(dates) == 0 {
		return c
	}
	step, top := axis(c.Max)
	c.Grid = grid(step, top)
	slot := 100 / float64(len(dates))
	for i, date := range dates {
		b := stackBar{Date: date}
		x, w := float64(i)*slot+slot*0.1, slot*0.8
		y := chartBase
		title := date + ":"
		for s, n := range values[i] {
			h := plotH(n, top)
			y -= h
			b.Rects = append(b.Rects, stackRect{Class: series[s].Class, X: x, Y: y, W: w, H: h})
			if s > 0 {
				title += ","
			}
			title += " " + formatNum(n) + " " + series[s].Label
		}
		b.Title = title
		c.Bars = append(c.Bars, b)
		c.Ticks = dateTicks(len(dates), i, date, x, w, c.Ticks)
	}
	return c
}
