package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// TestKeysCreateListRevoke walks API.md's key life: created with its value
// once, listed without it, revoked at once (the next request is 401, the
// key's web sessions end), revoked again is 204.
func TestKeysCreateListRevoke(t *testing.T) {
	e := newEnv(t, 0)
	r := e.do("POST", "/api/v1/keys", e.keyA, map[string]any{"name": "ci", "scope": "read"})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	m := r.json(t)
	secret, _ := m["key"].(string)
	if !store.ValidKeyFormat(secret) || m["scope"] != "read" || m["name"] != "ci" ||
		m["prefix"] != secret[:8] || m["last_used_at"] != nil || m["revoked_at"] != nil {
		t.Fatalf("created key body: %s", r.body)
	}
	if _, ok := m["organization_id"]; ok {
		t.Errorf("key body shows organization_id: %s", r.body)
	}
	id := m["id"].(string)
	if got := r.header.Get("Location"); got != "/api/v1/keys/"+id {
		t.Errorf("Location = %q", got)
	}
	if created, _ := time.Parse(time.RFC3339, m["created_at"].(string)); !created.Equal(e.clock.Now()) {
		t.Errorf("created_at = %v, want %v", m["created_at"], e.clock.Now())
	}
	// The new key works, with read scope.
	if r := e.do("GET", "/api/v1/domains", secret, nil); r.status != http.StatusOK {
		t.Fatalf("new key: %d", r.status)
	}
	if r := e.do("POST", "/api/v1/keys", secret, map[string]any{"name": "x"}); r.status != 403 || r.errorCode(t) != "insufficient_scope" {
		t.Errorf("read key creating: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/api/v1/keys/"+id, secret, nil); r.status != 403 || r.errorCode(t) != "insufficient_scope" {
		t.Errorf("read key revoking itself: %d %s", r.status, r.body)
	}

	list := e.do("GET", "/api/v1/keys", e.readA, nil)
	if list.status != http.StatusOK || strings.Contains(string(list.body), secret) ||
		strings.Contains(string(list.body), "sha256") {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	if n := len(list.json(t)["data"].([]any)); n != 3 {
		t.Errorf("list has %d keys, want 3", n)
	}

	token, _, err := e.db.CreateSession(id, e.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do("DELETE", "/api/v1/keys/"+id, e.keyA, nil); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/domains", secret, nil); r.status != http.StatusUnauthorized {
		t.Errorf("revoked key: %d, want 401", r.status)
	}
	if _, _, _, err := e.db.FindSession(token, e.clock.Now()); err == nil {
		t.Error("the revoked key's session still works")
	}
	if r := e.do("DELETE", "/api/v1/keys/"+strings.ToUpper(id), e.keyA, nil); r.status != http.StatusNoContent {
		t.Errorf("revoke again: %d %s", r.status, r.body)
	}

	// Active first, then revoked ones; newest first within each.
	list = e.do("GET", "/api/v1/keys", e.keyA, nil)
	data := list.json(t)["data"].([]any)
	var names []string
	for _, k := range data {
		names = append(names, k.(map[string]any)["name"].(string))
	}
	if got := strings.Join(names, ","); got != "a-read,a-full,ci" {
		t.Errorf("order = %s, want a-read,a-full,ci", got)
	}
	if data[2].(map[string]any)["revoked_at"] == nil {
		t.Error("revoked key has no revoked_at")
	}
}

// TestKeysLimit ensures the sixth active key is 403 key_limit_exceeded and
// creates nothing, and that revoking one makes room.
func TestKeysLimit(t *testing.T) {
	e := newEnv(t, 0)
	var last string
	for i := 0; i < store.MaxActiveKeys-2; i++ {
		r := e.do("POST", "/api/v1/keys", e.keyA, map[string]any{"name": "k"})
		if r.status != http.StatusCreated {
			t.Fatalf("key %d: %d %s", i, r.status, r.body)
		}
		if r.json(t)["scope"] != "full" {
			t.Errorf("default scope: %s", r.body)
		}
		last = r.json(t)["id"].(string)
	}
	r := e.do("POST", "/api/v1/keys", e.keyA, map[string]any{"name": "sixth"})
	if r.status != http.StatusForbidden || r.errorCode(t) != "key_limit_exceeded" {
		t.Fatalf("sixth key: %d %s", r.status, r.body)
	}
	if keys, _ := e.db.ListAPIKeys(e.orgA.ID); len(keys) != store.MaxActiveKeys {
		t.Errorf("%d keys stored, want %d", len(keys), store.MaxActiveKeys)
	}
	if r := e.do("DELETE", "/api/v1/keys/"+last, e.keyA, nil); r.status != http.StatusNoContent {
		t.Fatal(r.status)
	}
	if r := e.do("POST", "/api/v1/keys", e.keyA, map[string]any{"name": "sixth"}); r.status != http.StatusCreated {
		t.Errorf("after a revocation: %d %s", r.status, r.body)
	}
}

// TestKeysBadInput covers every refused body and id.
func TestKeysBadInput(t *testing.T) {
	e := newEnv(t, 0)
	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"Empty", map[string]any{}, 422, "validation_failed"},
		{"BlankName", map[string]any{"name": "  "}, 422, "validation_failed"},
		{"LongName", map[string]any{"name": strings.Repeat("n", 101)}, 422, "validation_failed"},
		{"ControlChar", map[string]any{"name": "a\x01b"}, 422, "validation_failed"},
		{"BadScope", map[string]any{"name": "x", "scope": "admin"}, 422, "validation_failed"},
		{"UnknownField", map[string]any{"name": "x", "org": "y"}, 400, "bad_request"},
		{"WrongType", map[string]any{"name": 5}, 400, "bad_request"},
		{"NotJSON", "{", 400, "bad_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/api/v1/keys", e.keyA, c.body)
			if r.status != c.status || r.errorCode(t) != c.code {
				t.Errorf("%d %s, want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
	if r := e.do("POST", "/api/v1/keys", e.keyA, map[string]any{"name": strings.Repeat("n", 100)}); r.status != 201 {
		t.Errorf("100-character name: %d %s", r.status, r.body)
	}
	if keys, _ := e.db.ListAPIKeys(e.orgA.ID); len(keys) != 3 {
		t.Errorf("%d keys stored, want 3: a refused request created one", len(keys))
	}
	for _, id := range []string{"nope", store.NewID()} {
		if r := e.do("DELETE", "/api/v1/keys/"+id, e.keyA, nil); r.status != 404 || r.errorCode(t) != "not_found" {
			t.Errorf("revoke %s: %d %s", id, r.status, r.body)
		}
	}
	if r := e.do("GET", "/api/v1/keys?limit=0", e.keyA, nil); r.status != 400 {
		t.Errorf("limit=0: %d", r.status)
	}
	if r := e.do("GET", "/api/v1/keys", "", nil); r.status != 401 {
		t.Errorf("no key: %d", r.status)
	}
}

// TestKeysTenantIsolation ensures another organization's key is 404 and
// stays active, and is never listed.
func TestKeysTenantIsolation(t *testing.T) {
	e := newEnv(t, 0)
	if r := e.do("DELETE", "/api/v1/keys/"+e.keyAID, e.keyB, nil); r.status != 404 || r.errorCode(t) != "not_found" {
		t.Fatalf("org B revoking A's key: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/api/v1/domains", e.keyA, nil); r.status != 200 {
		t.Errorf("A's key after B's attempt: %d", r.status)
	}
	r := e.do("GET", "/api/v1/keys", e.keyB, nil)
	if strings.Contains(string(r.body), e.keyAID) || len(r.json(t)["data"].([]any)) != 1 {
		t.Errorf("B's list: %s", r.body)
	}
}

// TestKeysPagination pages through the list.
func TestKeysPagination(t *testing.T) {
	e := newEnv(t, 0)
	r := e.do("GET", "/api/v1/keys?limit=1&page=2", e.keyA, nil)
	m := r.json(t)
	p := m["pagination"].(map[string]any)
	if len(m["data"].([]any)) != 1 || p["total"] != 2.0 || p["total_pages"] != 2.0 {
		t.Errorf("page 2: %s", r.body)
	}
	if r := e.do("GET", "/api/v1/keys?page=3", e.keyA, nil); len(r.json(t)["data"].([]any)) != 0 {
		t.Errorf("past the end: %s", r.body)
	}
}
