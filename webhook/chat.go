package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The delivery formats of a webhook. FormatDMARCD, the default, is the
// signed alert.created event of API.md; FormatSlack and FormatTeams are
// chat messages for incoming webhooks, rendered from the same event at
// each attempt (Body), so the outbox holds one format-neutral entry.
const (
	FormatDMARCD = "dmarcd"
	// FormatSlack is a Slack incoming-webhook message: "text" (mrkdwn,
	// the whole message: Slack's notification text and what Mattermost,
	// which ignores Block Kit, shows) and "blocks" (what Slack shows).
	FormatSlack = "slack"
	// FormatTeams is a Microsoft Teams workflow webhook message: an
	// Adaptive Card in "attachments", as the "Post to a channel when a
	// webhook request is received" workflow expects.
	FormatTeams = "teams"
)

// Formats returns the delivery formats, the default first.
func Formats() []string { return []string{FormatDMARCD, FormatSlack, FormatTeams} }

// ValidFormat reports whether f is one of Formats.
func ValidFormat(f string) bool {
	return f == FormatDMARCD || f == FormatSlack || f == FormatTeams
}

// Limits of the chat formats. Slack documents 40,000 characters for
// "text", 50 blocks per message, 3,000 characters for a section's text
// and 150 for a header's; Teams refuses messages over about 28 KB. dmarcd
// keeps well inside them: a value is cut at maxValueRunes, an alert shows
// at most maxFacts evidence lines.
const (
	SlackMaxText        = 40000
	SlackMaxBlocks      = 50
	SlackMaxSectionText = 3000
	SlackMaxHeaderText  = 150
	TeamsMaxBytes       = 28 << 10
	// TeamsCardVersion is the Adaptive Card schema version of the card:
	// 1.4 renders in Teams on the desktop, the web and mobile.
	TeamsCardVersion = "1.4"
	// TeamsCardType is the attachment's contentType.
	TeamsCardType = "application/vnd.microsoft.card.adaptive"
	// TeamsCardSchema is the card's $schema.
	TeamsCardSchema = "http://adaptivecards.io/schemas/adaptive-card.json"

	maxValueRunes = 300
	maxFacts      = 20
)

// ChatContext is what a chat message shows beyond its event: the name of
// the alert's domain and the URL people reach dmarcd by, for the link to
// the alert.
type ChatContext struct {
	Domain    string // "" when the alert concerns no domain
	PublicURL string // --public-url; "" for no link
}

// Body returns the bytes to send for ev in format: Encode's for
// FormatDMARCD (and ""), a chat message for FormatSlack and FormatTeams,
// always valid JSON. It returns an error for an event Encode refuses, an
// event whose data holds no alert, or an unknown format.
func Body(format string, ev *Event, cc ChatContext) ([]byte, error) {
	body, err := Encode(ev)
	if err != nil || format == FormatDMARCD || format == "" {
		return body, err
	}
	if !ValidFormat(format) {
		return nil, fmt.Errorf("webhook: unknown format %q", format)
	}
	var data struct {
		Alert *chatAlert `json:"alert"`
	}
	if err := json.Unmarshal(ev.Data, &data); err != nil || data.Alert == nil {
		return nil, errors.New("webhook: the event holds no alert to render")
	}
	m := newMessage(data.Alert, ev.Test, cc)
	if format == FormatSlack {
		return marshal(m.slack())
	}
	// Teams has no limit per element but one on the whole message: drop
	// evidence lines from the end until it fits, saying so.
	all := m.facts
	for n := len(all); ; n-- {
		m.facts = all[:n]
		if n < len(all) {
			m.facts = append(slices.Clip(all[:n]), fact{moreLabel, fmt.Sprintf("%d more lines on dmarcd's page", len(all)-n)})
		}
		body, err := marshal(m.teams())
		if err != nil || len(body) <= TeamsMaxBytes || n == 0 {
			return body, err
		}
	}
}

// moreLabel is the label of the line that says evidence was left out.
const moreLabel = "And"

// marshal encodes v as JSON without escaping <, > and & (the services
// read JSON, not HTML, and the escapes would triple the size of text
// that has many).
func marshal(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// AlertURL returns the page of alert id of domain domainID (which may be
// "") under publicURL, or "" without a public URL: the Alerts page,
// filtered to the domain, at the alert.
func AlertURL(publicURL, domainID, id string) string {
	base := strings.TrimRight(publicURL, "/")
	if base == "" {
		return ""
	}
	u := base + "/alerts"
	if domainID != "" {
		u += "?domain=" + url.QueryEscape(domainID)
	}
	if id != "" {
		u += "#alert-" + url.PathEscape(id)
	}
	return u
}

// chatAlert is what a chat message reads of the alert object.
type chatAlert struct {
	ID        string          `json:"id"`
	DomainID  *string         `json:"domain_id"`
	Type      string          `json:"type"`
	Severity  string          `json:"severity"`
	Title     string          `json:"title"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details"`
	CreatedAt time.Time       `json:"created_at"`
}

// fact is one evidence line: a label (dmarcd's words) and a value, which
// may come from a report and is treated as hostile.
type fact struct{ label, value string }

// message is a chat message before it is put in a format. Every string
// is plain text, cleaned (clean) but not escaped: each format escapes
// for itself.
type message struct {
	severity string // info, warning, critical
	heading  string // "🔴 Critical: <title>"
	domain   string
	summary  string
	facts    []fact
	link     string
	footer   string // "dmarc_failure_rate · 2026-11-22 09:30 UTC"
}

func newMessage(a *chatAlert, test bool, cc ChatContext) *message {
	sev := a.Severity
	mark, word := "🔵", "Info"
	switch sev {
	case "critical":
		mark, word = "🔴", "Critical"
	case "warning":
		mark, word = "🟠", "Warning"
	default:
		sev = "info"
	}
	if test {
		mark, word = "🧪", "Test ("+strings.ToLower(word)+")"
	}
	m := &message{
		severity: sev,
		heading:  mark + " " + word + ": " + clean(a.Title, maxValueRunes),
		domain:   clean(cc.Domain, 253),
		summary:  clean(a.Message, 4*maxValueRunes),
		facts:    evidence(a.Details),
	}
	if m.domain == "" {
		m.domain = "none (an alert about the organization)"
	}
	domainID := ""
	if a.DomainID != nil {
		domainID = *a.DomainID
	}
	if !test {
		m.link = AlertURL(cc.PublicURL, domainID, a.ID)
	} else if base := strings.TrimRight(cc.PublicURL, "/"); base != "" {
		m.link = base + "/alerts"
	}
	m.footer = "dmarcd · " + clean(a.Type, 64)
	if !a.CreatedAt.IsZero() {
		m.footer += " · " + a.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	return m
}

// clean makes s one line of at most max runes: control characters
// (newlines included) become spaces, bidirectional overrides and other
// invisible format characters go, runs of spaces shrink to one, and a
// cut is marked "…". Invalid UTF-8 becomes U+FFFD.
func clean(s string, max int) string {
	out := make([]rune, 0, min(len(s), max+1))
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case unicode.IsControl(r) || unicode.IsSpace(r):
			space = len(out) > 0
			continue
		case unicode.Is(unicode.Cf, r):
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
		if len(out) > max {
			return string(out[:max-1]) + "…"
		}
	}
	return string(out)
}

// zwsp is U+200B ZERO WIDTH SPACE: invisible, it keeps two characters
// from being read as markup.
const zwsp = "\u200b"

// defuse keeps hostile text from being markup in chat Markdown: "](" is
// what makes a Markdown link (Mattermost, Teams), "@" starts a mention
// (@channel in Mattermost). Both get an invisible space in between, so
// they show as written and do nothing. A backquote, which could open a
// code span running over the next lines (the link's among them), becomes
// the look-alike U+02CB.
var defuse = strings.NewReplacer("](", "]"+zwsp+"(", "@", "@"+zwsp, "`", "\u02cb")

// slackEscape escapes text for Slack mrkdwn: the three characters Slack
// gives meaning to (links <url|text>, mentions <!channel>) become
// entities, and defuse applies for Mattermost, which reads the same text
// as Markdown.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "](", "]"+zwsp+"(", "@", "@"+zwsp, "`", "\u02cb")

// slackURL makes u safe between < and | of a Slack link.
var slackURL = strings.NewReplacer("&", "%26", "<", "%3C", ">", "%3E", "|", "%7C", " ", "%20")

// cutEscaped cuts s, which may hold entities, to at most max bytes (not
// inside an entity or a rune), marking the cut "…".
func cutEscaped(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if amp := strings.LastIndexByte(s[:cut], '&'); amp >= 0 && !strings.Contains(s[amp:cut], ";") {
		cut = amp
	}
	return s[:cut] + mark
}

// cutRunes cuts s to at most max runes, marking the cut "…".
func cutRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// Slack payload types (Block Kit).
type (
	slackMessage struct {
		Text   string       `json:"text"`
		Blocks []slackBlock `json:"blocks"`
	}
	slackBlock struct {
		Type     string      `json:"type"`
		Text     *slackText  `json:"text,omitempty"`
		Elements []slackText `json:"elements,omitempty"`
	}
	slackText struct {
		Type  string `json:"type"` // plain_text or mrkdwn
		Text  string `json:"text"`
		Emoji *bool  `json:"emoji,omitempty"`
	}
)

func (m *message) slack() slackMessage {
	no := false
	head := cutRunes(m.heading, SlackMaxHeaderText)
	intro := "*Domain:* " + slackEscape.Replace(m.domain) + "\n" + slackEscape.Replace(m.summary)
	blocks := []slackBlock{
		{Type: "header", Text: &slackText{Type: "plain_text", Text: head, Emoji: &no}},
		{Type: "section", Text: &slackText{Type: "mrkdwn", Text: cutEscaped(intro, SlackMaxSectionText)}},
	}
	lines := make([]string, len(m.facts))
	for i, f := range m.facts {
		lines[i] = "• *" + f.label + ":* " + slackEscape.Replace(f.value)
	}
	// The evidence in sections of at most SlackMaxSectionText bytes (a
	// byte count is within Slack's character count), keeping room for the
	// footer block.
	var sec strings.Builder
	flush := func() {
		if sec.Len() > 0 && len(blocks) < SlackMaxBlocks-1 {
			blocks = append(blocks, slackBlock{Type: "section", Text: &slackText{Type: "mrkdwn", Text: sec.String()}})
		}
		sec.Reset()
	}
	for _, l := range lines {
		l = cutEscaped(l, SlackMaxSectionText)
		if sec.Len() > 0 && sec.Len()+1+len(l) > SlackMaxSectionText {
			flush()
		}
		if sec.Len() > 0 {
			sec.WriteByte('\n')
		}
		sec.WriteString(l)
	}
	flush()
	foot := slackEscape.Replace(m.footer)
	if m.link != "" {
		foot = "<" + slackURL.Replace(m.link) + "|Open in dmarcd> · " + foot
	}
	blocks = append(blocks, slackBlock{Type: "context", Elements: []slackText{{Type: "mrkdwn", Text: cutEscaped(foot, SlackMaxSectionText)}}})

	// text: the whole message, for notifications and for Mattermost.
	var t strings.Builder
	t.WriteString("*" + slackEscape.Replace(m.heading) + "*\n" + intro)
	for _, l := range lines {
		t.WriteString("\n" + l)
	}
	if m.link != "" {
		t.WriteString("\n<" + slackURL.Replace(m.link) + "|Open in dmarcd>")
	}
	return slackMessage{Text: cutEscaped(t.String(), SlackMaxText), Blocks: blocks}
}

// Teams payload types (a message with an Adaptive Card attachment).
type (
	teamsMessage struct {
		Type        string            `json:"type"` // "message"
		Attachments []teamsAttachment `json:"attachments"`
	}
	teamsAttachment struct {
		ContentType string    `json:"contentType"`
		ContentURL  *string   `json:"contentUrl"` // null
		Content     teamsCard `json:"content"`
	}
	teamsCard struct {
		Schema  string         `json:"$schema"`
		Type    string         `json:"type"` // "AdaptiveCard"
		Version string         `json:"version"`
		MSTeams map[string]any `json:"msteams,omitempty"`
		Body    []teamsElement `json:"body"`
		Actions []teamsOpenURL `json:"actions,omitempty"`
	}
	teamsElement struct {
		Type     string      `json:"type"` // TextBlock or FactSet
		Text     string      `json:"text,omitempty"`
		Wrap     bool        `json:"wrap,omitempty"`
		Weight   string      `json:"weight,omitempty"`
		Size     string      `json:"size,omitempty"`
		Color    string      `json:"color,omitempty"`
		IsSubtle bool        `json:"isSubtle,omitempty"`
		Spacing  string      `json:"spacing,omitempty"`
		Facts    []teamsFact `json:"facts,omitempty"`
	}
	teamsFact struct {
		Title string `json:"title"`
		Value string `json:"value"`
	}
	teamsOpenURL struct {
		Type  string `json:"type"` // Action.OpenUrl
		Title string `json:"title"`
		URL   string `json:"url"`
	}
)

func (m *message) teams() teamsMessage {
	color := "Accent"
	switch m.severity {
	case "critical":
		color = "Attention"
	case "warning":
		color = "Warning"
	}
	body := []teamsElement{
		{Type: "TextBlock", Text: defuse.Replace(m.heading), Wrap: true, Weight: "Bolder", Size: "Medium", Color: color},
		{Type: "TextBlock", Text: "Domain: " + defuse.Replace(m.domain), Wrap: true, IsSubtle: true, Spacing: "None"},
		{Type: "TextBlock", Text: defuse.Replace(m.summary), Wrap: true},
	}
	if len(m.facts) > 0 {
		facts := make([]teamsFact, len(m.facts))
		for i, f := range m.facts {
			facts[i] = teamsFact{Title: f.label, Value: defuse.Replace(f.value)}
		}
		body = append(body, teamsElement{Type: "FactSet", Facts: facts})
	}
	body = append(body, teamsElement{Type: "TextBlock", Text: defuse.Replace(m.footer), Wrap: true, IsSubtle: true, Size: "Small"})
	card := teamsCard{Schema: TeamsCardSchema, Type: "AdaptiveCard", Version: TeamsCardVersion,
		MSTeams: map[string]any{"width": "Full"}, Body: body}
	if m.link != "" {
		card.Actions = []teamsOpenURL{{Type: "Action.OpenUrl", Title: "Open in dmarcd", URL: m.link}}
	}
	return teamsMessage{Type: "message", Attachments: []teamsAttachment{{ContentType: TeamsCardType, Content: card}}}
}
