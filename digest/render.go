package digest

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"math"
	"strings"
	texttemplate "text/template"

	"github.com/dmarcd/dmarcd/internal/numfmt"
	"github.com/dmarcd/dmarcd/senders"
)

// MaxBytes is the most a rendered digest (subject, text and HTML parts
// together) may take.
const MaxBytes = 100 << 10

// Message is a rendered digest: a subject, a plain-text part and an HTML
// part that say the same.
type Message struct {
	Subject string
	Text    string
	HTML    string
}

// RenderOptions are what a rendering needs beyond the digest.
type RenderOptions struct {
	// PublicURL is the web interface's address (serve --public-url), for
	// links to the domains and alerts; "" renders no links.
	PublicURL string
	// SettingsURL is where the recipient changes what is mailed; "" for
	// none.
	SettingsURL string
}

//go:embed templates
var templateFS embed.FS

var funcs = map[string]any{
	"pct":       numfmt.Percent,
	"num":       numfmt.Count,
	"rate":      rateText,
	"change":    change,
	"msgChange": msgChange,
	"stage":     senders.StageLabel,
	"upper":     strings.ToUpper,
	"bar":       bar,
	"plural":    plural,
	"day":       func(t interface{ Format(string) string }) string { return t.Format("Mon 2 Jan 2006") },
	"when":      func(t interface{ Format(string) string }) string { return t.Format("2006-01-02 15:04 UTC") },
	"sevColor":  sevColor,
	"rateColor": rateColor,
	"int64":     func(n int) int64 { return int64(n) },
	"sub":       func(a, b int) int { return a - b },
}

var (
	textTmpl = texttemplate.Must(texttemplate.New("digest.txt").Funcs(funcs).ParseFS(templateFS, "templates/digest.txt"))
	htmlTmpl = htmltemplate.Must(htmltemplate.New("digest.html").Funcs(funcs).ParseFS(templateFS, "templates/digest.html"))
)

// view is what the templates receive.
type view struct {
	*Digest
	Subject     string
	PeriodLabel string
	PrevLabel   string
	PublicURL   string
	SettingsURL string
}

// Subject is the digest's subject: it names the organization and the
// period ("Daily DMARC digest for acme: Sat 28 Nov 2026").
func (d *Digest) Subject() string {
	kind := "Daily"
	if d.Period == Week {
		kind = "Weekly"
	}
	return clean(fmt.Sprintf("%s DMARC digest for %s: %s", kind, d.Organization, d.Period.Label(d.From, d.To)))
}

// Render renders the digest's subject, text and HTML, together under
// MaxBytes: when the lists within the caps of Limits still make it
// larger (long names, many of them escaped in HTML), the last domain
// sections, then table rows and alerts, are left out and counted ("and
// 3 more domains") until it fits.
func Render(d *Digest, o RenderOptions) (*Message, error) {
	cur := *d
	for {
		m, err := render(&cur, o)
		if err != nil || len(m.Text)+len(m.HTML)+len(m.Subject) <= MaxBytes {
			return m, err
		}
		if !shrink(&cur) {
			return nil, fmt.Errorf("digest: %s does not fit %d bytes", d, MaxBytes)
		}
	}
}

// shrink leaves out the last domain section, else half the alerts, else
// half the table's rows; false when nothing is left to leave out.
func shrink(d *Digest) bool {
	switch {
	case len(d.Detailed) > 0:
		d.Detailed = d.Detailed[:len(d.Detailed)-1]
		d.MoreDetailed++
	case len(d.Alerts) > 0:
		d.Alerts = d.Alerts[:len(d.Alerts)/2]
	case len(d.Domains) > 0:
		keep := len(d.Domains) / 2
		d.MoreDomains += len(d.Domains) - keep
		d.Domains = d.Domains[:keep]
	default:
		return false
	}
	return true
}

func render(d *Digest, o RenderOptions) (*Message, error) {
	v := view{Digest: d, Subject: d.Subject(), PeriodLabel: d.Period.Label(d.From, d.To),
		PrevLabel: d.Period.Label(d.PrevFrom, d.PrevTo), PublicURL: strings.TrimRight(o.PublicURL, "/"), SettingsURL: o.SettingsURL}
	var t, h bytes.Buffer
	if err := textTmpl.Execute(&t, v); err != nil {
		return nil, fmt.Errorf("digest: render text: %w", err)
	}
	if err := htmlTmpl.Execute(&h, v); err != nil {
		return nil, fmt.Errorf("digest: render HTML: %w", err)
	}
	return &Message{Subject: v.Subject, Text: t.String(), HTML: h.String()}, nil
}

// rateText is a pass rate as the web interface shows it: "–" without mail.
func rateText(messages int64, rate float64) string {
	if messages <= 0 {
		return "–"
	}
	return numfmt.Percent(rate)
}

// change is how a pass rate moved from the period before, in percentage
// points: "+1.2 pts", "−0.4 pts", "no change"; "new" when the period
// before had no mail, "" when this one has none.
func change(messages, prevMessages int64, rate, prevRate float64) string {
	switch {
	case messages <= 0:
		return ""
	case prevMessages <= 0:
		return "new"
	}
	// Round as Percent does, so the change is the difference of the two
	// figures shown.
	diff := math.Round(rate*1000) - math.Round(prevRate*1000)
	switch {
	case diff > 0:
		return fmt.Sprintf("+%.1f pts", diff/10)
	case diff < 0:
		return fmt.Sprintf("−%.1f pts", -diff/10)
	}
	return "no change"
}

// msgChange is how the messages moved from the period before: "+12.5 %".
func msgChange(messages, prevMessages int64) string {
	if prevMessages <= 0 {
		return ""
	}
	f := float64(messages-prevMessages) / float64(prevMessages)
	if f >= 0 {
		return "+" + numfmt.Percent(f)
	}
	return "−" + numfmt.Percent(-f)
}

// plural is n with the word, "1 message", "2 messages".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return numfmt.Count(n) + " " + word + "s"
}

// barCells are the widths of a pass-rate bar's two cells, in whole
// percent; 0 leaves the cell out.
type barCells struct{ Pass, Fail int }

// bar splits a bar at the pass rate (a bar drawn as a table: mail
// clients draw no SVG).
func bar(rate float64) barCells {
	p := int(math.Round(rate * 100))
	p = min(max(p, 0), 100)
	return barCells{Pass: p, Fail: 100 - p}
}

// sevColor is an alert severity's colour.
func sevColor(s string) string {
	switch s {
	case "critical":
		return "#b3261e"
	case "warning":
		return "#9a6700"
	}
	return "#1f5fa8"
}

// rateColor is the colour of a pass rate's figure: red under 50 %,
// amber under 95 % (the sender views' bands), else green.
func rateColor(messages int64, rate float64) string {
	switch {
	case messages <= 0:
		return "#57606a"
	case rate < senders.DefaultThresholds.Failing:
		return "#b3261e"
	case rate < senders.DefaultThresholds.Passing:
		return "#9a6700"
	}
	return "#1a7f37"
}
