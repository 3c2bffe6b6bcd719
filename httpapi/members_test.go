package httpapi

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// caller is one way of calling the API: an API key, or a person's web
// session as a bearer token.
type caller struct {
	name          string
	key, session  string
	readMembers   bool // may list members and read the audit log
	managePeople  bool
	writeOrgsData bool
}

func (c caller) do(e *env, method, path string, body any) resp {
	e.t.Helper()
	if c.session != "" {
		return e.do(method, path, "", body, "Authorization", "Bearer "+c.session)
	}
	return e.do(method, path, c.key, body)
}

// people adds an owner, an admin and a viewer to org A (and a viewer to
// org B) and returns the callers of org A with what each may do, and the
// member ids by email.
func (e *env) people() ([]caller, map[string]string) {
	e.t.Helper()
	a := e.api.app
	ids := map[string]string{}
	session := func(org *store.Organization, email, role string) string {
		m, link, err := a.AddMember(app.Operator(org), email, role)
		if err != nil {
			e.t.Fatal(err)
		}
		ids[email] = m.ID
		token, _, err := a.AcceptInvitation("192.0.2.200", link, "a long password")
		if err != nil {
			e.t.Fatal(err)
		}
		return token
	}
	owner := session(e.orgA, "owner@example.com", "owner")
	admin := session(e.orgA, "admin@example.com", "admin")
	viewer := session(e.orgA, "viewer@example.com", "viewer")
	session(e.orgB, "other@example.com", "owner")
	return []caller{
		{name: "owner", session: owner, readMembers: true, managePeople: true, writeOrgsData: true},
		{name: "admin", session: admin, readMembers: true, writeOrgsData: true},
		{name: "viewer", session: viewer},
		{name: "full key", key: e.keyA, readMembers: true, writeOrgsData: true},
		{name: "read key", key: e.readA},
	}, ids
}

// memberState is what the member routes could change.
func (e *env) memberState() string {
	e.t.Helper()
	var b strings.Builder
	for _, org := range []*store.Organization{e.orgA, e.orgB} {
		ms, err := e.db.ListMembers(org.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range ms {
			fmt.Fprintf(&b, "%s %s %s\n", org.Name, m.Account.Email, m.Role)
		}
	}
	return b.String()
}

// TestMembersByRole calls every member route and the audit log as each
// role and key: the refused ones are 403 and change nothing, the allowed
// ones answer the documented shapes.
func TestMembersByRole(t *testing.T) {
	e := newEnv(t, 0)
	callers, ids := e.people()
	before := e.memberState()
	for _, c := range callers {
		r := c.do(e, "GET", "/api/v1/members", nil)
		if !c.readMembers {
			if r.status != http.StatusForbidden || r.errorCode(t) != "insufficient_scope" {
				t.Errorf("%s listing members: %d %s", c.name, r.status, r.body)
			}
		} else {
			data, _ := r.json(t)["data"].([]any)
			if r.status != http.StatusOK || len(data) != 3 {
				t.Fatalf("%s listing members: %d %s", c.name, r.status, r.body)
			}
			m := data[0].(map[string]any)
			if len(m) != 5 || m["email"] != "admin@example.com" || m["role"] != "admin" || m["id"] != ids["admin@example.com"] ||
				m["created_at"] == nil || m["last_sign_in_at"] == nil {
				t.Errorf("%s: a member: %v", c.name, m)
			}
		}
		r = c.do(e, "GET", "/api/v1/audit-log", nil)
		if c.readMembers != (r.status == http.StatusOK) {
			t.Errorf("%s reading the audit log: %d %s", c.name, r.status, r.body)
		}
		if c.managePeople {
			continue
		}
		for _, w := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/api/v1/members", map[string]any{"email": "new@example.com", "role": "owner"}},
			{"PATCH", "/api/v1/members/" + ids["viewer@example.com"], map[string]any{"role": "owner"}},
			{"DELETE", "/api/v1/members/" + ids["owner@example.com"], nil},
		} {
			if r := c.do(e, w.method, w.path, w.body); r.status != http.StatusForbidden || r.errorCode(t) != "insufficient_scope" {
				t.Errorf("%s: %s %s: %d %s", c.name, w.method, w.path, r.status, r.body)
			}
		}
	}
	if after := e.memberState(); after != before {
		t.Fatalf("refused calls changed the members:\n%s\n%s", before, after)
	}

	owner := callers[0]
	r := owner.do(e, "POST", "/api/v1/members", map[string]any{"email": "New@Example.com"})
	m := r.json(t)
	link := regexp.MustCompile(`^http://127\.0\.0\.1:\d+/invite/[A-Za-z0-9_-]{43}$`)
	if r.status != http.StatusCreated || m["email"] != "new@example.com" || m["role"] != "viewer" || m["last_sign_in_at"] != nil ||
		!link.MatchString(fmt.Sprint(m["invitation_url"])) || m["invitation_expires_at"] != "2026-11-29T09:30:00Z" ||
		r.header.Get("Location") != "/api/v1/members/"+fmt.Sprint(m["id"]) {
		t.Fatalf("invite: %d %s", r.status, r.body)
	}
	newID := m["id"].(string)
	if r := owner.do(e, "POST", "/api/v1/members", map[string]any{"email": "new@example.com"}); r.status != http.StatusConflict {
		t.Errorf("invite twice: %d %s", r.status, r.body)
	}
	r = owner.do(e, "POST", "/api/v1/members", map[string]any{"email": "nope", "role": "boss"})
	if r.status != http.StatusUnprocessableEntity || r.errorCode(t) != "validation_failed" || !strings.Contains(string(r.body), `"field":"role"`) || !strings.Contains(string(r.body), `"field":"email"`) {
		t.Errorf("bad invite: %d %s", r.status, r.body)
	}
	if r := owner.do(e, "PATCH", "/api/v1/members/"+newID, map[string]any{"role": "admin"}); r.status != http.StatusOK || r.json(t)["role"] != "admin" {
		t.Errorf("role change: %d %s", r.status, r.body)
	}
	if r := owner.do(e, "PATCH", "/api/v1/members/"+newID, map[string]any{}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("no role: %d %s", r.status, r.body)
	}
	if r := owner.do(e, "PATCH", "/api/v1/members/"+ids["owner@example.com"], map[string]any{"role": "viewer"}); r.status != http.StatusConflict {
		t.Errorf("demoting the last owner: %d %s", r.status, r.body)
	}
	// Org B's member is not found from org A.
	for _, w := range []struct{ method, path string }{
		{"PATCH", "/api/v1/members/" + ids["other@example.com"]}, {"DELETE", "/api/v1/members/" + ids["other@example.com"]},
		{"DELETE", "/api/v1/members/" + store.NewID()},
	} {
		if r := owner.do(e, w.method, w.path, map[string]any{"role": "viewer"}); r.status != http.StatusNotFound {
			t.Errorf("%s %s from org A: %d %s", w.method, w.path, r.status, r.body)
		}
	}
	if r := owner.do(e, "DELETE", "/api/v1/members/"+newID, nil); r.status != http.StatusNoContent {
		t.Errorf("remove: %d %s", r.status, r.body)
	}
	// A role change ends the viewer's session: the bearer is 401 after.
	if r := owner.do(e, "PATCH", "/api/v1/members/"+ids["viewer@example.com"], map[string]any{"role": "admin"}); r.status != http.StatusOK {
		t.Fatal(r.status)
	}
	if r := callers[2].do(e, "GET", "/api/v1/domains", nil); r.status != http.StatusUnauthorized {
		t.Errorf("the viewer's session after a role change: %d", r.status)
	}

	r = owner.do(e, "GET", "/api/v1/audit-log?limit=2&actor=owner@example.com", nil)
	body := r.json(t)
	data := body["data"].([]any)
	if r.status != http.StatusOK || len(data) != 2 || body["next_cursor"] == nil {
		t.Fatalf("audit page 1: %d %s", r.status, r.body)
	}
	first := data[0].(map[string]any)
	if first["action"] != "member.role" || first["target"] != "viewer@example.com to admin" || first["actor"] != "owner@example.com" ||
		first["ip"] != "127.0.0.1" || first["at"] != "2026-11-22T09:30:00Z" || len(first) != 5 {
		t.Errorf("the newest entry: %v", first)
	}
	r = owner.do(e, "GET", "/api/v1/audit-log?limit=2&actor=owner@example.com&cursor="+body["next_cursor"].(string), nil)
	if data := r.json(t)["data"].([]any); r.status != http.StatusOK || len(data) != 2 || data[0].(map[string]any)["action"] != "member.role" {
		t.Errorf("audit page 2: %d %s", r.status, r.body)
	}
	r = owner.do(e, "GET", "/api/v1/audit-log?action=member.add&from=2026-11-22&to=2026-11-22", nil)
	if data := r.json(t)["data"].([]any); r.status != http.StatusOK || len(data) != 4 {
		t.Errorf("member.add entries today: %d %s", r.status, r.body)
	}
	if r := owner.do(e, "GET", "/api/v1/audit-log?to=2026-11-21", nil); r.status != http.StatusOK || len(r.json(t)["data"].([]any)) != 0 {
		t.Errorf("entries before today: %s", r.body)
	}
	for _, q := range []string{"cursor=nonsense", "limit=0", "limit=501", "from=yesterday"} {
		if r := owner.do(e, "GET", "/api/v1/audit-log?"+q, nil); r.status/100 != 4 {
			t.Errorf("audit-log?%s: %d %s", q, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/members", "", nil, "Authorization", "Bearer not-a-session"); r.status != http.StatusUnauthorized {
		t.Errorf("a bad bearer: %d", r.status)
	}
}

// TestViewerRefusedOnEveryWriteRoute calls every route that changes
// something as a viewer (and a read key): each is 403 before anything
// else is looked at, and nothing changed; an admin's session gets past
// the check.
func TestViewerRefusedOnEveryWriteRoute(t *testing.T) {
	e := newEnv(t, 0)
	callers, _ := e.people()
	d := e.createDomain(e.keyA, "kept.example")
	state := func() string {
		doms, _, _ := e.db.ListDomains(e.orgA.ID, store.Page{Page: 1, Limit: 100})
		keys, _ := e.db.ListAPIKeys(e.orgA.ID)
		var b strings.Builder
		for _, x := range doms {
			b.WriteString(x.Name + " ")
		}
		for _, k := range keys {
			fmt.Fprintf(&b, "%s/%v ", k.ID, k.Active())
		}
		return b.String() + e.memberState()
	}
	before := state()
	param := regexp.MustCompile(`:[a-z_]+`)
	n := 0
	for _, rt := range e.api.Routes() {
		if rt.Access.public || !rt.Access.act.Writes() {
			continue
		}
		n++
		path := param.ReplaceAllString(rt.Path, d["id"].(string))
		for _, c := range []caller{callers[2], callers[4]} {
			r := c.do(e, rt.Method, path, map[string]any{"name": "x", "email": "x@example.com", "role": "owner"})
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s as %s: %d %s", rt.Method, rt.Path, c.name, r.status, r.body)
			}
		}
	}
	if n < 19 {
		t.Fatalf("only %d write routes found", n)
	}
	if after := state(); after != before {
		t.Fatalf("refused writes changed the store:\n%s\n%s", before, after)
	}
	if r := callers[1].do(e, "DELETE", "/api/v1/domains/"+d["id"].(string), nil); r.status != http.StatusNoContent {
		t.Errorf("an admin deleting a domain: %d %s", r.status, r.body)
	}
}
