package web

import (
	"fmt"

	"github.com/dmarcd/dmarcd/store"
)

// The charts are inline SVG drawn here from the roll-ups: bars as numbers,
// labels as text the template escapes, and a <title> per bar for hover and
// screen readers. Each chart comes with a table fallback in the page.

// barChart is a daily stacked pass/fail bar chart.
type barChart struct {
	W, H  int
	Bars  []bar
	Max   int64
	Ticks []tick
	Empty bool
}

type bar struct {
	X, W              float64
	PassY, PassH      float64
	FailY, FailH      float64
	Date              string
	Pass, Fail, Total int64
}

type tick struct {
	X      float64
	Label  string
	Anchor string // SVG text-anchor: the first label starts, the last ends, at its bar
}

const (
	chartW, chartH = 720, 180
	chartTop       = 8
	chartBottom    = 22 // room for date labels
)

// dailyChart draws days (oldest first).
func dailyChart(days []store.DayStats) barChart {
	c := barChart{W: chartW, H: chartH, Empty: true}
	for _, d := range days {
		c.Max = max(c.Max, d.Messages)
		if d.Messages > 0 {
			c.Empty = false
		}
	}
	if len(days) == 0 {
		return c
	}
	plot := float64(chartH - chartTop - chartBottom)
	step := float64(chartW) / float64(len(days))
	for i, d := range days {
		b := bar{X: float64(i)*step + step*0.1, W: step * 0.8, Date: d.Date,
			Pass: d.DMARCPass, Fail: d.DMARCFail, Total: d.Messages}
		if c.Max > 0 {
			b.PassH = plot * float64(d.DMARCPass) / float64(c.Max)
			b.FailH = plot * float64(d.DMARCFail) / float64(c.Max)
		}
		base := float64(chartH - chartBottom)
		b.PassY = base - b.PassH
		b.FailY = b.PassY - b.FailH
		c.Bars = append(c.Bars, b)
		switch {
		case i == 0:
			c.Ticks = append(c.Ticks, tick{X: b.X, Label: shortDate(d.Date), Anchor: "start"})
		case i == len(days)-1:
			c.Ticks = append(c.Ticks, tick{X: b.X + b.W, Label: shortDate(d.Date), Anchor: "end"})
		case len(days) > 10 && i == len(days)/2:
			c.Ticks = append(c.Ticks, tick{X: b.X + b.W/2, Label: shortDate(d.Date), Anchor: "middle"})
		}
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
	W, H   int
	Bars   []stackBar
	Max    int64
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

type stackRect struct {
	Class      string
	X, Y, W, H float64
}

// stackedChart draws one bar per day (oldest first) of the values of each
// series (values[i][s] is day i's value of series s).
func stackedChart(label string, series []seriesKey, dates []string, values [][]int64) stackChart {
	c := stackChart{W: chartW, H: chartH, Empty: true, Series: series, Label: label}
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
	plot := float64(chartH - chartTop - chartBottom)
	step := float64(chartW) / float64(len(dates))
	for i, date := range dates {
		b := stackBar{Date: date}
		x, w := float64(i)*step+step*0.1, step*0.8
		y := float64(chartH - chartBottom)
		title := date + ":"
		for s, n := range values[i] {
			h := 0.0
			if c.Max > 0 {
				h = plot * float64(n) / float64(c.Max)
			}
			y -= h
			b.Rects = append(b.Rects, stackRect{Class: series[s].Class, X: x, Y: y, W: w, H: h})
			if s > 0 {
				title += ","
			}
			title += " " + formatNum(n) + " " + series[s].Label
		}
		b.Title = title
		c.Bars = append(c.Bars, b)
		switch {
		case i == 0:
			c.Ticks = append(c.Ticks, tick{X: x, Label: shortDate(date), Anchor: "start"})
		case i == len(dates)-1:
			c.Ticks = append(c.Ticks, tick{X: x + w, Label: shortDate(date), Anchor: "end"})
		case len(dates) > 10 && i == len(dates)/2:
			c.Ticks = append(c.Ticks, tick{X: x + w/2, Label: shortDate(date), Anchor: "middle"})
		}
	}
	return c
}
