// Package chattest checks chat webhook messages against the shapes Slack
// and Microsoft Teams document, for tests, and runs a real HTTPS receiver
// on loopback that records them. The checks are written from the
// services' documentation, apart from the code that renders the
// messages (package webhook), so that one cannot simply agree with the
// other:
//
//   - Slack incoming webhooks (Block Kit): a JSON object with "text" (at
//     most 40,000 characters) and "blocks" (at most 50); a header block
//     holds plain_text of at most 150 characters, a section's text at most
//     3,000, a context block 1 to 10 elements; text objects are
//     plain_text or mrkdwn. In mrkdwn, "<" starts a link or a mention and
//     "&", "<", ">" are written as entities.
//   - Teams workflow webhooks ("Post to a channel when a webhook request
//     is received"): {"type": "message", "attachments": [{"contentType":
//     "application/vnd.microsoft.card.adaptive", "contentUrl": null,
//     "content": <Adaptive Card>}]}; the card has "type": "AdaptiveCard",
//     the "$schema" of adaptivecards.io and a "version" Teams renders
//     (1.0 to 1.5); TextBlock needs "text", FactSet "facts" of title and
//     value strings; of the actions Teams takes from webhooks,
//     Action.OpenUrl needs an absolute "url". Teams refuses messages over
//     about 28 KB.
//
// Both checks also hold every link in the message (Slack <url|text>,
// Markdown [text](url), an Action.OpenUrl) to an allowed URL prefix: text
// from a report must never become a link, nor a mention.
package chattest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// Documented limits.
const (
	SlackMaxText       = 40000
	SlackMaxBlocks     = 50
	SlackMaxSection    = 3000
	SlackMaxHeader     = 150
	SlackMaxContextEls = 10
	TeamsMaxBytes      = 28 << 10
)

var (
	// slackSpecial is a Slack link or mention: <url>, <url|text>, <!here>, <@U1>.
	slackSpecial = regexp.MustCompile(`<([^<>]*)>`)
	// mdLink is a Markdown inline link or image: [text](url).
	mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)]*)\)`)
	// entity is an HTML entity Slack decodes.
	entity = regexp.MustCompile(`^&(amp|lt|gt);`)
	// mention is a Mattermost mention of many people.
	mention = regexp.MustCompile(`(?i)@(channel|here|all)\b`)
)

// CheckSlack checks body as a Slack incoming-webhook message with Block
// Kit blocks. Every link must start with linkPrefix ("" allows none).
func CheckSlack(body []byte, linkPrefix string) error {
	var m map[string]json.RawMessage
	if err := strictObject(body, &m); err != nil {
		return err
	}
	for k := range m {
		if k != "text" && k != "blocks" {
			return fmt.Errorf("slack: unexpected top-level key %q", k)
		}
	}
	var text string
	if err := json.Unmarshal(m["text"], &text); err != nil || text == "" {
		return fmt.Errorf("slack: text must be a non-empty string (the notification text, and all Mattermost shows)")
	}
	if n := utf8.RuneCountInString(text); n > SlackMaxText {
		return fmt.Errorf("slack: text has %d characters, over %d", n, SlackMaxText)
	}
	if err := checkMrkdwn("text", text, linkPrefix); err != nil {
		return err
	}
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(m["blocks"], &blocks); err != nil || len(blocks) == 0 {
		return fmt.Errorf("slack: blocks must be a non-empty array")
	}
	if len(blocks) > SlackMaxBlocks {
		return fmt.Errorf("slack: %d blocks, over %d", len(blocks), SlackMaxBlocks)
	}
	for i, b := range blocks {
		var typ string
		_ = json.Unmarshal(b["type"], &typ)
		where := fmt.Sprintf("slack: block %d (%s)", i, typ)
		switch typ {
		case "header":
			t, err := textObject(b["text"], where)
			if err != nil {
				return err
			}
			if t.Type != "plain_text" {
				return fmt.Errorf("%s: a header's text must be plain_text", where)
			}
			if n := utf8.RuneCountInString(t.Text); n > SlackMaxHeader {
				return fmt.Errorf("%s: %d characters, over %d", where, n, SlackMaxHeader)
			}
		case "section":
			t, err := textObject(b["text"], where)
			if err != nil {
				return err
			}
			if n := utf8.RuneCountInString(t.Text); n > SlackMaxSection {
				return fmt.Errorf("%s: %d characters, over %d", where, n, SlackMaxSection)
			}
			if t.Type == "mrkdwn" {
				if err := checkMrkdwn(where, t.Text, linkPrefix); err != nil {
					return err
				}
			}
		case "context":
			var els []json.RawMessage
			if err := json.Unmarshal(b["elements"], &els); err != nil || len(els) == 0 || len(els) > SlackMaxContextEls {
				return fmt.Errorf("%s: elements must be 1 to %d", where, SlackMaxContextEls)
			}
			for _, el := range els {
				t, err := textObject(el, where)
				if err != nil {
					return err
				}
				if t.Type == "mrkdwn" {
					if err := checkMrkdwn(where, t.Text, linkPrefix); err != nil {
						return err
					}
				}
			}
		case "divider":
		default:
			return fmt.Errorf("%s: not a block type this message should use", where)
		}
	}
	return nil
}

type slackTextObject struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Emoji    *bool  `json:"emoji"`
	Verbatim *bool  `json:"verbatim"`
}

func textObject(raw json.RawMessage, where string) (slackTextObject, error) {
	var t slackTextObject
	if err := json.Unmarshal(raw, &t); err != nil || t.Text == "" {
		return t, fmt.Errorf("%s: a text object needs a non-empty text", where)
	}
	switch {
	case t.Type != "plain_text" && t.Type != "mrkdwn":
		return t, fmt.Errorf("%s: text type %q", where, t.Type)
	case t.Type == "mrkdwn" && t.Emoji != nil:
		return t, fmt.Errorf("%s: emoji belongs to plain_text", where)
	case t.Type == "plain_text" && t.Verbatim != nil:
		return t, fmt.Errorf("%s: verbatim belongs to mrkdwn", where)
	}
	return t, nil
}

// checkMrkdwn checks Slack mrkdwn that Mattermost also reads as Markdown:
// every <...> is a link to linkPrefix, every & starts an entity, no
// Markdown link, no mass mention.
func checkMrkdwn(where, s, linkPrefix string) error {
	for _, m := range slackSpecial.FindAllStringSubmatch(s, -1) {
		target, _, _ := strings.Cut(m[1], "|")
		if linkPrefix == "" || !strings.HasPrefix(target, linkPrefix) {
			return fmt.Errorf("%s: Slack link or mention %q is not ours", where, m[0])
		}
	}
	if strings.Count(s, "<") != strings.Count(s, ">") || strings.Count(s, "<") != len(slackSpecial.FindAllString(s, -1)) {
		return fmt.Errorf("%s: an unescaped < or > in %q", where, s)
	}
	for i := strings.IndexByte(s, '&'); i >= 0; i = next(s, i) {
		if !entity.MatchString(s[i:]) {
			return fmt.Errorf("%s: an unescaped & at %q", where, s[i:min(len(s), i+12)])
		}
	}
	return checkMarkdown(where, s, linkPrefix)
}

func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '&')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// checkMarkdown holds Markdown links to linkPrefix and refuses mass mentions.
func checkMarkdown(where, s, linkPrefix string) error {
	for _, m := range mdLink.FindAllStringSubmatch(s, -1) {
		if linkPrefix == "" || !strings.HasPrefix(m[1], linkPrefix) {
			return fmt.Errorf("%s: Markdown link %q is not ours", where, m[0])
		}
	}
	if m := mention.FindString(s); m != "" {
		return fmt.Errorf("%s: mention %q", where, m)
	}
	if strings.Contains(s, "`") {
		return fmt.Errorf("%s: a backquote, which opens a code span over what follows", where)
	}
	return nil
}

// CheckTeams checks body as a Teams workflow webhook message carrying an
// Adaptive Card. Every link must start with linkPrefix ("" allows none).
func CheckTeams(body []byte, linkPrefix string) error {
	if len(body) > TeamsMaxBytes {
		return fmt.Errorf("teams: %d bytes, over %d", len(body), TeamsMaxBytes)
	}
	var m struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string          `json:"contentType"`
			ContentURL  json.RawMessage `json:"contentUrl"`
			Content     map[string]json.RawMessage
		} `json:"attachments"`
	}
	if err := strictObject(body, &m); err != nil {
		return err
	}
	if m.Type != "message" || len(m.Attachments) == 0 {
		return fmt.Errorf("teams: want type message with attachments, got type %q and %d attachments", m.Type, len(m.Attachments))
	}
	for i, a := range m.Attachments {
		where := fmt.Sprintf("teams: attachment %d", i)
		if a.ContentType != "application/vnd.microsoft.card.adaptive" {
			return fmt.Errorf("%s: contentType %q", where, a.ContentType)
		}
		if len(a.ContentURL) > 0 && string(a.ContentURL) != "null" {
			return fmt.Errorf("%s: contentUrl %s, want null", where, a.ContentURL)
		}
		if err := checkCard(where, a.Content, linkPrefix); err != nil {
			return err
		}
	}
	return nil
}

func checkCard(where string, c map[string]json.RawMessage, linkPrefix string) error {
	var typ, schema, version string
	_ = json.Unmarshal(c["type"], &typ)
	_ = json.Unmarshal(c["$schema"], &schema)
	_ = json.Unmarshal(c["version"], &version)
	switch {
	case typ != "AdaptiveCard":
		return fmt.Errorf("%s: card type %q", where, typ)
	case schema != "http://adaptivecards.io/schemas/adaptive-card.json":
		return fmt.Errorf("%s: $schema %q", where, schema)
	case !regexp.MustCompile(`^1\.[0-5]$`).MatchString(version):
		return fmt.Errorf("%s: version %q is not one Teams renders (1.0 to 1.5)", where, version)
	}
	var body []map[string]json.RawMessage
	if err := json.Unmarshal(c["body"], &body); err != nil || len(body) == 0 {
		return fmt.Errorf("%s: body must be a non-empty array", where)
	}
	for i, el := range body {
		var et string
		_ = json.Unmarshal(el["type"], &et)
		w := fmt.Sprintf("%s: body %d (%s)", where, i, et)
		switch et {
		case "TextBlock":
			var text string
			if err := json.Unmarshal(el["text"], &text); err != nil || text == "" {
				return fmt.Errorf("%s: text must be a non-empty string", w)
			}
			if err := checkMarkdown(w, text, linkPrefix); err != nil {
				return err
			}
		case "FactSet":
			var facts []map[string]json.RawMessage
			if err := json.Unmarshal(el["facts"], &facts); err != nil || len(facts) == 0 {
				return fmt.Errorf("%s: facts must be a non-empty array", w)
			}
			for _, f := range facts {
				var title, value string
				if json.Unmarshal(f["title"], &title) != nil || json.Unmarshal(f["value"], &value) != nil || len(f) != 2 {
					return fmt.Errorf("%s: a fact is {title, value}, both strings", w)
				}
				if err := checkMarkdown(w, title+" "+value, linkPrefix); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("%s: not an element this message should use", w)
		}
	}
	var actions []map[string]json.RawMessage
	if raw, ok := c["actions"]; ok {
		if err := json.Unmarshal(raw, &actions); err != nil {
			return fmt.Errorf("%s: actions must be an array", where)
		}
	}
	for _, a := range actions {
		var at, title, u string
		_ = json.Unmarshal(a["type"], &at)
		_ = json.Unmarshal(a["title"], &title)
		_ = json.Unmarshal(a["url"], &u)
		if at != "Action.OpenUrl" || title == "" {
			return fmt.Errorf("%s: action %q (title %q): only Action.OpenUrl with a title is expected", where, at, title)
		}
		if linkPrefix == "" || !strings.HasPrefix(u, linkPrefix) {
			return fmt.Errorf("%s: Action.OpenUrl to %q is not ours", where, u)
		}
	}
	return nil
}

// strictObject decodes body, which must be one JSON object, into v.
func strictObject(body []byte, v any) error {
	if !json.Valid(body) {
		return errors.New("chat message is not valid JSON")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("chat message: %v", err)
	}
	return nil
}

// Receiver is a real HTTPS server on loopback that records every request
// and answers with the next of its statuses (the last one repeats).
type Receiver struct {
	Server   *httptest.Server
	mu       sync.Mutex
	got      []Request
	statuses []int
}

// Request is one request as a Receiver saw it.
type Request struct {
	Header http.Header
	Body   []byte
}

// NewReceiver starts a Receiver answering statuses (200 when none), closed
// when t ends. Its certificate is Server.Certificate().
func NewReceiver(t testing.TB, statuses ...int) *Receiver {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []int{http.StatusOK}
	}
	rc := &Receiver{statuses: statuses}
	rc.Server = httptest.NewUnstartedServer(rc)
	rc.Server.Config.ErrorLog = log.New(io.Discard, "", 0)
	rc.Server.StartTLS()
	t.Cleanup(rc.Server.Close)
	return rc
}

// ServeHTTP records the request and answers.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, Request{Header: r.Header.Clone(), Body: body})
	status := rc.statuses[min(len(rc.got), len(rc.statuses))-1]
	rc.mu.Unlock()
	w.WriteHeader(status)
}

// Requests returns what the receiver got so far.
func (rc *Receiver) Requests() []Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Request(nil), rc.got...)
}

// URL returns the receiver's https URL with path.
func (rc *Receiver) URL(path string) string { return rc.Server.URL + path }
