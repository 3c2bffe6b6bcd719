package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// The notification settings page (issue 27): the organization's
// recipients (the alert severities mailed at once and the digest
// frequency of each), edited as one form by owners and admins (full-scope
// keys today) and shown read-only to viewers, with the newest mails and
// what became of them. ?email= (every mail's List-Unsubscribe) marks
// that recipient's row.

// maxNewRows is how many empty rows the form offers for new recipients.
const maxNewRows = 3

func (h *Handler) notificationRoutes() {
	h.handle("GET", "/settings/notifications", app.ReadNotifications, h.notifications)
	h.handle("POST", "/settings/notifications", app.WriteNotifications, h.saveNotifications)
}

type notificationRow struct {
	Index    int
	Email    string
	Severity map[string]bool
	Digest   string
	Mine     bool // the ?email= of the link followed
}

type notificationsPage struct {
	Rows       []notificationRow
	Severities []string
	Digests    []string
	Mail       []*store.MailStatus
	Email      string // the ?email= asked for
	Listed     bool   // Email is one of the rows
	Notice     string
	Error      string
}

func (h *Handler) notificationsData(r *req, s *store.NotificationSettings) (notificationsPage, error) {
	p := notificationsPage{Severities: []string{"critical", "warning", "info"}, Digests: []string{"off", "daily", "weekly"},
		Email: strings.ToLower(strings.TrimSpace(r.URL.Query().Get("email")))}
	for i, rc := range s.Recipients {
		row := notificationRow{Index: i, Email: rc.Email, Digest: rc.Digest, Severity: map[string]bool{}, Mine: rc.Email == p.Email}
		for _, sev := range rc.Severities {
			row.Severity[sev] = true
		}
		p.Listed = p.Listed || row.Mine
		p.Rows = append(p.Rows, row)
	}
	mail, err := h.app.MailLog(r.Context(), r.actor, 20)
	if err != nil {
		return p, err
	}
	p.Mail = mail
	return p, nil
}

func (h *Handler) notifications(w http.ResponseWriter, r *req) error {
	s, err := h.app.Notifications(r.Context(), r.actor)
	if err != nil {
		return err
	}
	p, err := h.notificationsData(r, s)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("done") == "saved" {
		p.Notice = "Saved."
	}
	h.render(w, r, http.StatusOK, "notifications", "Notifications", p)
	return nil
}

// recipientsOf reads the form: rows email_N, sev_N (repeated), digest_N
// and remove_N, N from 0 to rows-1; rows without an address are skipped.
func recipientsOf(r *req) []store.NotificationRecipient {
	n, _ := strconv.Atoi(r.PostForm.Get("rows"))
	n = min(max(n, 0), store.MaxNotificationRecipients+maxNewRows)
	var out []store.NotificationRecipient
	for i := range n {
		k := strconv.Itoa(i)
		email := strings.TrimSpace(r.PostForm.Get("email_" + k))
		if email == "" || r.PostForm.Get("remove_"+k) != "" {
			continue
		}
		out = append(out, store.NotificationRecipient{Email: email, Severities: r.PostForm["sev_"+k], Digest: r.PostForm.Get("digest_" + k)})
	}
	return out
}

func (h *Handler) saveNotifications(w http.ResponseWriter, r *req) error {
	list := recipientsOf(r)
	if _, err := h.app.SetNotifications(r.Context(), r.actor, list); err != nil {
		status, msg, ferr := formFailure(err)
		if ferr != nil {
			return ferr
		}
		// Show the form as sent, with the reason.
		p, err := h.notificationsData(r, &store.NotificationSettings{Recipients: list})
		if err != nil {
			return err
		}
		p.Error = msg
		h.render(w, r, status, "notifications", "Notifications", p)
		return nil
	}
	http.Redirect(w, r.Request, "/settings/notifications?done=saved", http.StatusSeeOther)
	return nil
}
