package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/store"
)

// The quarantine pages (Settings -> Quarantine, issue 24): the inputs
// that reached the organization and yielded no usable report, each with
// its reason, its bytes, Retry (once the cause is fixed, say the domain
// registered) and Delete. Only a full-scope key sees them, as only such a
// key may retry or delete: a read key gets no tab and 403. Entries of
// another organization, and those of none (only the CLI sees them), are
// not found. The API's /quarantine routes do the same through the same
// store methods and the same retrier.

// QuarantineRetrier ingests a quarantine entry's bytes again:
// *ingest.Pipeline, the retrier of the API's POST /quarantine/{id}/retry.
type QuarantineRetrier interface {
	RetryQuarantine(ctx context.Context, id string) (*ingest.Result, error)
}

func (h *Handler) quarantineRoutes() {
	h.handle("GET", "/settings/quarantine", readAccess, h.quarantine)
	h.handle("GET", "/settings/quarantine/:id", readAccess, h.quarantineEntry)
	h.handle("GET", "/settings/quarantine/:id/raw", readAccess, h.quarantineRaw)
	h.handle("POST", "/settings/quarantine/:id/retry", writeAccess, h.retryQuarantine)
	h.handle("POST", "/settings/quarantine/:id/delete", writeAccess, h.deleteQuarantine)
}

// quarantineRow is an entry as the pages show it, with the domain its
// recipient (a reporting address) belongs to, when the organization has
// it.
type quarantineRow struct {
	*store.QuarantineEntry
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
	Retry   bool // a retrier is configured
}

// previewBytes is how much of an entry's bytes its page shows.
const previewBytes = 8 << 10

// errNoRetrier is the answer to a Retry on a server built without one.
var errNoRetrier = &pageError{status: http.StatusServiceUnavailable, title: "Retry unavailable",
	msg: "This server runs without its ingest pipeline, so entries can be looked at and deleted but not retried. Use 'dmarcd quarantine retry'."}

// fullOnly refuses a read-only session: the quarantine holds whole mails.
func fullOnly(r *req) error {
	if r.readOnly() {
		return errReadOnly
	}
	return nil
}

func (h *Handler) quarantine(w http.ResponseWriter, r *req) error {
	if err := fullOnly(r); err != nil {
		return err
	}
	page := pageNum(r)
	entries, total, err := h.listQuarantine(r.org.ID, store.Page{Page: page, Limit: listLimit})
	if err != nil {
		return err
	}
	rows, err := h.quarantineRows(r.org.ID, entries...)
	if err != nil {
		return err
	}
	p := quarantinePage{Entries: rows, Total: total, Pager: newPager(r, page, total, listLimit), Notice: quarantineNotice(r.URL.Query())}
	h.render(w, r, http.StatusOK, "quarantine", "Quarantine", p)
	return nil
}

// quarantineRows pairs entries with the domains of their recipients.
func (h *Handler) quarantineRows(orgID string, entries ...*store.QuarantineEntry) ([]quarantineRow, error) {
	domains, err := h.allDomains(orgID)
	if err != nil {
		return nil, err
	}
	byAddr := make(map[string]*store.Domain, len(domains))
	for _, d := range domains {
		byAddr[strings.ToLower(d.ReportingEmail)] = d
	}
	rows := make([]quarantineRow, 0, len(entries))
	for _, e := range entries {
		rows = append(rows, quarantineRow{QuarantineEntry: e, Domain: byAddr[strings.ToLower(e.Recipient)]})
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

// ownEntry is the :id entry of a full-scope session's organization and
// its bytes: 403 for a read-only session, not found for any other's.
func (h *Handler) ownEntry(r *req) (*store.QuarantineEntry, []byte, error) {
	if err := fullOnly(r); err != nil {
		return nil, nil, err
	}
	return h.findQuarantine(r.org.ID, r.params.ByName("id"))
}

func (h *Handler) quarantineEntry(w http.ResponseWriter, r *req) error {
	e, raw, err := h.ownEntry(r)
	if err != nil {
		return err
	}
	rows, err := h.quarantineRows(r.org.ID, e)
	if err != nil {
		return err
	}
	p := quarantineEntryPage{Entry: rows[0], Preview: previewText(raw[:min(len(raw), previewBytes)]), Cut: len(raw) > previewBytes,
		Notice: quarantineNotice(r.URL.Query()), Retry: h.cfg.Quarantine != nil}
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
	e, raw, err := h.ownEntry(r)
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
	id := strings.ToLower(r.params.ByName("id"))
	res, err := h.retryQuarantineOf(r.Context(), r.org.ID, id)
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
	if err := h.deleteQuarantineOf(r.org.ID, r.params.ByName("id")); err != nil {
		return err
	}
	http.Redirect(w, r.Request, "/settings/quarantine?done=deleted", http.StatusSeeOther)
	return nil
}

// The quarantine operations of these pages, in one place: the store's
// organization-scoped quarantine methods and the retrier, as the API's
// quarantine routes run them.

func (h *Handler) listQuarantine(orgID string, p store.Page) ([]*store.QuarantineEntry, int, error) {
	return h.db.ListQuarantineOf(orgID, p)
}

// findQuarantine is org's entry id and its bytes; ErrNotFound for any
// other organization's, one of none, or a malformed id.
func (h *Handler) findQuarantine(orgID, id string) (*store.QuarantineEntry, []byte, error) {
	return h.db.FindQuarantineOf(orgID, strings.ToLower(id))
}

// retryQuarantineOf ingests org's entry id again: ErrNotFound before
// anything runs when it is not org's.
func (h *Handler) retryQuarantineOf(ctx context.Context, orgID, id string) (*ingest.Result, error) {
	if _, _, err := h.findQuarantine(orgID, id); err != nil {
		return nil, err
	}
	if h.cfg.Quarantine == nil {
		return nil, errNoRetrier
	}
	res, err := h.cfg.Quarantine.RetryQuarantine(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return res, err
}

func (h *Handler) deleteQuarantineOf(orgID, id string) error {
	return h.db.DeleteQuarantineOf(orgID, strings.ToLower(id))
}
