package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// The quarantine pages (Settings -> Quarantine, issue 24): the inputs
// that reached the organization and yielded no usable report, each with
// its reason, its bytes, Retry (once the cause is fixed, say the domain
// registered) and Delete. Only a full-scope key sees them, as only such a
// key may retry or delete: every route asks app.Write, so a read key gets
// no tab and 403. Entries of another organization, and those of none
// (only the CLI sees them), are not found. The operations are the
// application layer's, the API's /quarantine routes' own.

func (h *Handler) quarantineRoutes() {
	h.handle("GET", "/settings/quarantine", app.Write, h.quarantine)
	h.handle("GET", "/settings/quarantine/:id", app.Write, h.quarantineEntry)
	h.handle("GET", "/settings/quarantine/:id/raw", app.Write, h.quarantineRaw)
	h.handle("POST", "/settings/quarantine/:id/retry", app.Write, h.retryQuarantine)
	h.handle("POST", "/settings/quarantine/:id/delete", app.Write, h.deleteQuarantine)
}

// quarantineRow is an entry as the pages show it, with the domain its
// recipient (a reporting address) belongs to, when the organization has
// it.
type quarantineRow struct {
	app.Quarantined
	Domain *store.Domain
}

type quarantinePage struct {
	Entries []quarantineRow
	Total   int
	Pager   pager
	Notice  string
}

type quarantineEntryPage struct {
	Entry   quarantineRow
	Preview string // the start of the bytes kept, as text
	Cut     bool   // Preview is not all of them
	Notice  string
}

// previewBytes is how much of an entry's bytes its page shows.
const previewBytes = 8 << 10

func (h *Handler) quarantine(w http.ResponseWriter, r *req) error {
	page := pageNum(r)
	entries, total, err := h.app.ListQuarantine(r.Context(), r.actor, store.Page{Page: page, Limit: listLimit})
	if err != nil {
		return err
	}
	rows, err := h.quarantineRows(r.orgID(), entries...)
	if err != nil {
		return err
	}
	p := quarantinePage{Entries: rows, Total: total, Pager: newPager(r, page, total, listLimit), Notice: quarantineNotice(r.URL.Query())}
	h.render(w, r, http.StatusOK, "quarantine", "Quarantine", p)
	return nil
}

// quarantineRows pairs entries with the domains of their recipients.
func (h *Handler) quarantineRows(orgID string, entries ...app.Quarantined) ([]quarantineRow, error) {
	domains, err := h.allDomains(orgID)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*store.Domain, len(domains))
	for _, d := range domains {
		byID[d.ID] = d
	}
	rows := make([]quarantineRow, 0, len(entries))
	for _, e := range entries {
		row := quarantineRow{Quarantined: e}
		if e.DomainID != nil {
			row.Domain = byID[*e.DomainID]
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// quarantineNotice says what the action that redirected here did.
func quarantineNotice(q url.Values) string {
	switch q.Get("done") {
	case "deleted":
		return "The entry is deleted."
	case "stays":
		return "Retried: the input still holds no usable report, so it stays in the quarantine. The reason below is the one this retry found."
	case "retried":
		n := func(k string) int { v, _ := strconv.Atoi(q.Get(k)); return max(v, 0) }
		var parts []string
		if s := n("stored"); s > 0 || (n("duplicates") == 0 && n("expired") == 0) {
			parts = append(parts, plural(s, "report")+" stored")
		}
		if d := n("duplicates"); d > 0 {
			parts = append(parts, plural(d, "report")+" stored before")
		}
		if x := n("expired"); x > 0 {
			parts = append(parts, plural(x, "report")+" older than the retention window, not stored")
		}
		return "Retried: " + strings.Join(parts, ", ") + "; the entry is removed."
	}
	return ""
}

// entryID is the :id of a quarantine route, as ids are matched.
func entryID(r *req) string { return strings.ToLower(r.params.ByName("id")) }

func (h *Handler) quarantineEntry(w http.ResponseWriter, r *req) error {
	e, raw, err := h.app.FindQuarantine(r.Context(), r.actor, entryID(r))
	if err != nil {
		return err
	}
	rows, err := h.quarantineRows(r.orgID(), *e)
	if err != nil {
		return err
	}
	p := quarantineEntryPage{Entry: rows[0], Preview: previewText(raw[:min(len(raw), previewBytes)]), Cut: len(raw) > previewBytes,
		Notice: quarantineNotice(r.URL.Query())}
	h.render(w, r, http.StatusOK, "quarantine_entry", "Quarantine entry", p)
	return nil
}

// previewText shows bytes as text: invalid UTF-8 and control characters
// (but for line ends and tabs) become U+FFFD. The template escapes it.
func previewText(b []byte) string {
	return strings.Map(func(c rune) rune {
		if c == '\n' || c == '\t' {
			return c
		}
		if c == '\r' {
			return -1
		}
		if unicode.IsControl(c) {
			return unicode.ReplacementChar
		}
		return c
	}, strings.ToValidUTF8(string(b), "\uFFFD"))
}

// quarantineRaw serves the bytes kept, as the API's /raw does: a download,
// never shown as a page.
func (h *Handler) quarantineRaw(w http.ResponseWriter, r *req) error {
	e, raw, err := h.app.FindQuarantine(r.Context(), r.actor, entryID(r))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.Header().Set("Content-Disposition", `attachment; filename="`+e.ID+`.eml"`)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(raw)
	return nil
}

func (h *Handler) retryQuarantine(w http.ResponseWriter, r *req) error {
	id := entryID(r)
	res, err := h.app.RetryQuarantine(r.Context(), r.actor, id)
	if err != nil {
		return err
	}
	if res.Quarantined != "" {
		http.Redirect(w, r.Request, "/settings/quarantine/"+url.PathEscape(id)+"?done=stays", http.StatusSeeOther)
		return nil
	}
	q := url.Values{"done": {"retried"}}
	var stored, dups int
	for _, o := range res.Reports {
		if o.Duplicate {
			dups++
		} else {
			stored++
		}
	}
	q.Set("stored", strconv.Itoa(stored))
	q.Set("duplicates", strconv.Itoa(dups))
	q.Set("expired", strconv.Itoa(len(res.Expired)))
	http.Redirect(w, r.Request, "/settings/quarantine?"+q.Encode(), http.StatusSeeOther)
	return nil
}

func (h *Handler) deleteQuarantine(w http.ResponseWriter, r *req) error {
	if err := h.app.DeleteQuarantine(r.Context(), r.actor, entryID(r)); err != nil {
		return err
	}
	http.Redirect(w, r.Request, "/settings/quarantine?done=deleted", http.StatusSeeOther)
	return nil
}
