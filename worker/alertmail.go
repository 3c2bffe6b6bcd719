package worker

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/dmarcd/dmarcd/mailout"
	"github.com/dmarcd/dmarcd/store"
)

// Alert mail defaults.
const (
	// DefaultAlertMailWindow is the grouping window: one domain mails one
	// recipient at most once in it.
	DefaultAlertMailWindow = 10 * time.Minute
	// DefaultAlertMailEvery is how often the job files new alerts and
	// flushes due windows.
	DefaultAlertMailEvery = 15 * time.Second
	// maxAlertsListed bounds the alerts one mail lists; the rest are
	// counted, with a link to the list.
	maxAlertsListed = 50
)

// AlertMail is the job that mails alerts to the recipients of each
// organization's notification settings whose severities include them,
// grouped: the first alert of a domain for a recipient is mailed at the
// next run, and what follows within Window goes out in one mail when the
// window has passed, listing everything that happened in it. Its state is
// in the store (store.CollectAlertMail, DueAlertMail, FlushAlertMail):
// nothing is lost or mailed twice across a restart.
type AlertMail struct {
	Store *store.DB
	// PublicURL is the base of the links (--public-url, no trailing
	// slash); "" writes paths only.
	PublicURL string
	// Window is the grouping window; 0 means DefaultAlertMailWindow.
	Window time.Duration
	// Every is the job's interval; 0 means DefaultAlertMailEvery.
	Every time.Duration
	Log   *slog.Logger // nil discards
}

// Job returns the job to give the Scheduler.
func (j *AlertMail) Job() Job {
	every := j.Every
	if every <= 0 {
		every = DefaultAlertMailEvery
	}
	return Job{Name: "alert-mail", Every: every, AtStart: true, Run: j.Run}
}

// Run files the alerts created since the last run and queues a mail for
// every window due at now.
func (j *AlertMail) Run(ctx context.Context, now time.Time) error {
	if _, err := j.Store.CollectAlertMail(now); err != nil {
		return err
	}
	window := j.Window
	if window <= 0 {
		window = DefaultAlertMailWindow
	}
	for ctx.Err() == nil {
		due, err := j.Store.DueAlertMail(now, window, 100)
		if err != nil || len(due) == 0 {
			return err
		}
		for _, b := range due {
			var m *store.OutgoingMail
			if len(b.Alerts) > 0 {
				if m, err = RenderAlertMail(b, j.PublicURL); err != nil {
					return err
				}
			}
			st, err := j.Store.FlushAlertMail(b, m)
			if err != nil {
				return err
			}
			if st != nil && j.Log != nil {
				j.Log.Info("alert mail queued", "mail_id", st.ID, "org_id", b.OrgID, "domain", b.Domain, "alerts", len(b.Alerts))
			}
		}
	}
	return nil
}

// alertMailView is what the templates of an alert mail show.
type alertMailView struct {
	Org, Domain string
	Alerts      []alertLine
	More        int
	ListURL     string
	SettingsURL string
	Since       string
}

type alertLine struct {
	Severity, Title, Message, URL, At string
}

// RenderAlertMail builds the mail of a due window: a subject naming the
// domain and the count (the first title when one), a text part and an
// HTML part listing each alert (severity, title, message, time, link to
// it on the alerts page). Alert text is escaped in the HTML and
// line breaks are taken out of the subject, so report or DNS text cannot
// add markup or header fields.
func RenderAlertMail(b *store.AlertMailBatch, publicURL string) (*store.OutgoingMail, error) {
	what := b.Domain
	if what == "" {
		what = b.OrgName
	}
	v := alertMailView{Org: b.OrgName, Domain: b.Domain, SettingsURL: mailout.SettingsURL(publicURL, b.To)}
	q := url.Values{}
	if b.DomainID != "" {
		q.Set("domain", b.DomainID)
	}
	v.ListURL = publicURL + "/alerts"
	if len(q) > 0 {
		v.ListURL += "?" + q.Encode()
	}
	for i, a := range b.Alerts {
		if i == maxAlertsListed {
			v.More = len(b.Alerts) - i
			break
		}
		v.Alerts = append(v.Alerts, alertLine{Severity: a.Severity, Title: a.Title, Message: a.Message,
			URL: v.ListURL + "#alert-" + a.ID, At: a.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")})
	}
	if b.LastMail != nil {
		v.Since = b.LastMail.UTC().Format("2006-01-02 15:04 UTC")
	}
	subject := fmt.Sprintf("[dmarcd] %d alerts for %s", len(b.Alerts), what)
	if len(b.Alerts) == 1 {
		subject = fmt.Sprintf("[dmarcd] %s: %s", what, b.Alerts[0].Title)
	}
	var text, html bytes.Buffer
	if err := alertMailText.Execute(&text, v); err != nil {
		return nil, err
	}
	if err := alertMailHTML.Execute(&html, v); err != nil {
		return nil, err
	}
	return &store.OutgoingMail{OrgID: b.OrgID, Kind: store.MailKindAlert, To: b.To, Subject: OneLine(subject),
		Text: text.String(), HTML: html.String(), ListUnsubscribe: v.SettingsURL}, nil
}

// OneLine makes s fit a header field: control characters (CR, LF, TAB
// and the rest) become spaces, runs of spaces one, and it is cut to 200
// characters.
func OneLine(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r == ' ' }), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}

// alertMailText is the plain-text part: text/template, nothing to escape
// in text (the header fields are made apart, see OneLine).
var alertMailText = texttemplate.Must(texttemplate.New("text").Parse(`{{if .Domain}}Alerts for {{.Domain}}{{else}}Alerts{{end}} in {{.Org}}{{if .Since}} since {{.Since}}{{end}}:
{{range .Alerts}}
[{{.Severity}}] {{.Title}}
{{.Message}}
{{.At}} · {{.URL}}
{{end}}{{if .More}}
... and {{.More}} more: {{.ListURL}}
{{end}}
All alerts: {{.ListURL}}

You receive this mail because your address is in the notification settings
of {{.Org}} in dmarcd. To change what you receive: {{.SettingsURL}}
`))

var alertMailHTML = template.Must(template.New("alert").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>dmarcd alerts</title></head>
<body style="font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#1f2328;background:#ffffff;margin:0;padding:16px">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="max-width:640px">
<tr><td style="font-size:18px;font-weight:600;padding-bottom:8px">{{if .Domain}}Alerts for {{.Domain}}{{else}}Alerts{{end}} in {{.Org}}</td></tr>
{{if .Since}}<tr><td style="color:#59636e;font-size:13px;padding-bottom:12px">Since {{.Since}}</td></tr>{{end}}
{{range .Alerts}}<tr><td style="border-left:4px solid {{if eq .Severity "critical"}}#cf222e{{else if eq .Severity "warning"}}#bf8700{{else}}#0969da{{end}};padding:8px 12px;margin-bottom:8px">
<div style="font-weight:600"><a href="{{.URL}}" style="color:#0969da">{{.Title}}</a> <span style="font-size:12px;color:#59636e">{{.Severity}} · {{.At}}</span></div>
<div style="font-size:14px">{{.Message}}</div>
</td></tr>
<tr><td style="height:8px"></td></tr>{{end}}
{{if .More}}<tr><td style="font-size:14px">… and {{.More}} more.</td></tr>{{end}}
<tr><td style="font-size:14px;padding-top:8px"><a href="{{.ListURL}}" style="color:#0969da">All alerts</a></td></tr>
<tr><td style="font-size:12px;color:#59636e;padding-top:16px">You receive this mail because your address is in the notification settings of {{.Org}} in dmarcd. <a href="{{.SettingsURL}}" style="color:#59636e">Change what you receive</a>.</td></tr>
</table></body></html>
`))
