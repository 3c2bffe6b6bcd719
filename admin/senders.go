package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// SendersView is what 'dmarcd senders' shows of one domain: its mail over
// a window grouped by sender (as GET /domains/{id}/senders) and where it
// stands on the way to p=reject (as GET /domains/{id}/policy-advice).
type SendersView struct {
	DomainID     string           `json:"domain_id"`
	Domain       string           `json:"domain"`
	Organization string           `json:"organization"`
	DateFrom     time.Time        `json:"date_from"`
	DateTo       time.Time        `json:"date_to"`
	Senders      []*senders.Group `json:"data"`
	// Breakdown sums the groups by category: legitimate, forwarded and
	// unidentified mail, adding up to the window's messages.
	Breakdown senders.Breakdown `json:"breakdown"`
	Advice    *senders.Advice   `json:"policy_advice"`
}

// Senders answers the sender views of the domain named domain (or with
// that id) in organization orgRef (a name or id; "" when the name is
// unambiguous across organizations) over from..to; see Service.
func (l *Local) Senders(ctx context.Context, orgRef, domain string, from, to time.Time) (*SendersView, error) {
	dom, org, err := l.findDomain(orgRef, domain)
	if err != nil {
		return nil, err
	}
	v := l.Views
	if v == nil {
		v = &senders.Views{DB: l.DB, Known: senders.DefaultKnownSenders()}
	}
	out := &SendersView{DomainID: dom.ID, Domain: dom.Name, Organization: org.Name, DateFrom: from.UTC(), DateTo: to.UTC()}
	if out.Senders, err = v.Senders(ctx, dom.OrgID, dom.ID, from, to); err != nil {
		return nil, err
	}
	if out.Senders == nil {
		out.Senders = []*senders.Group{}
	}
	out.Breakdown = senders.BreakdownOf(out.Senders)
	if out.Advice, err = v.PolicyAdvice(ctx, dom.OrgID, dom.ID, from, to); err != nil {
		return nil, err
	}
	return out, nil
}

// findDomain resolves a domain name (or id) within orgRef, or within every
// organization when orgRef is "" and only one has that name.
func (l *Local) findDomain(orgRef, domain string) (*store.Domain, *store.Organization, error) {
	orgID := ""
	if orgRef != "" {
		org, err := l.DB.FindOrganization(orgRef)
		if err != nil {
			return nil, nil, err
		}
		orgID = org.ID
	}
	name := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(domain), "."))
	refs, err := l.DB.DomainsNamed(orgID, name)
	if err != nil {
		return nil, nil, err
	}
	var dom *store.Domain
	switch {
	case len(refs) == 1:
		dom, err = l.DB.FindDomainByID(refs[0].ID)
	case len(refs) > 1:
		var orgs []string
		for _, r := range refs {
			if o, err := l.DB.FindOrganizationByID(r.OrgID); err == nil {
				orgs = append(orgs, o.Name)
			}
		}
		return nil, nil, &store.Error{Kind: store.ErrConflict,
			Msg: fmt.Sprintf("domain %s is registered in %d organizations (%s): choose one with --org", name, len(refs), strings.Join(orgs, ", "))}
	case store.ValidID(name):
		dom, err = l.DB.FindDomainByID(name)
		if err == nil && orgID != "" && dom.OrgID != orgID {
			err = store.ErrNotFound
		}
	default:
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		where := "any organization"
		if orgRef != "" {
			where = "organization " + orgRef
		}
		return nil, nil, &store.Error{Kind: store.ErrNotFound, Msg: fmt.Sprintf("no domain %s in %s", name, where)}
	}
	if err != nil {
		return nil, nil, err
	}
	org, err := l.DB.FindOrganizationByID(dom.OrgID)
	if err != nil {
		return nil, nil, err
	}
	return dom, org, nil
}

func (h *handler) senders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err1 := strconv.ParseInt(q.Get("from"), 10, 64)
	to, err2 := strconv.ParseInt(q.Get("to"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		writeErr(w, &store.Error{Kind: store.ErrInvalid, Msg: "bad request: from and to must be Unix seconds"})
		return
	}
	v, err := h.svc.Senders(r.Context(), q.Get("org"), r.PathValue("domain"), time.Unix(from, 0).UTC(), time.Unix(to, 0).UTC())
	h.answer(w, v, err)
}

// Senders implements Service.
func (c *Client) Senders(ctx context.Context, orgRef, domain string, from, to time.Time) (*SendersView, error) {
	q := url.Values{"from": {strconv.FormatInt(from.Unix(), 10)}, "to": {strconv.FormatInt(to.Unix(), 10)}}
	if orgRef != "" {
		q.Set("org", orgRef)
	}
	var v SendersView
	if err := c.do(ctx, "GET", "/v1/domains/"+url.PathEscape(domain)+"/senders?"+q.Encode(), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
