package httpapi

import (
	"net/http"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// The API key endpoints (API.md, "API keys"). The rules (5 active keys,
// scopes, name length, tenant isolation, sessions ending with their key)
// live in the application layer and the store, which the CLI and the web
// interface call too.

// keyBody is a key as the API shows it: never a hash, never the value.
type keyBody struct {
	ID         string      `json:"id"`
	Name       string      `json:"name"`
	Prefix     string      `json:"prefix"`
	Scope      store.Scope `json:"scope"`
	CreatedAt  time.Time   `json:"created_at"` // UTC, whole seconds (the store's)
	LastUsedAt *time.Time  `json:"last_used_at"`
	RevokedAt  *time.Time  `json:"revoked_at"`
}

// createdKey is the creation answer: the key and, this once, its value.
type createdKey struct {
	keyBody
	Key string `json:"key"`
}

func newKeyBody(k *store.APIKey) keyBody {
	return keyBody{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Scope: k.Scope,
		CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
}

func (s *Server) listKeys(w http.ResponseWriter, r *request) error {
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	keys, total, err := s.app.ListKeys(r.Context(), r.actor, store.Page{Page: p.Page, Limit: p.Limit})
	if err != nil {
		return err
	}
	out := make([]keyBody, len(keys))
	for i, k := range keys {
		out[i] = newKeyBody(k)
	}
	writeJSON(w, http.StatusOK, listBody{Data: out, Pagination: p.of(total)})
	return nil
}

func (s *Server) createKey(w http.ResponseWriter, r *request) error {
	var in struct {
		Name  *string `json:"name"`
		Scope *string `json:"scope"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	scope := string(store.ScopeFull)
	if in.Scope != nil {
		scope = *in.Scope
	}
	key, secret, err := s.app.CreateKey(r.Context(), r.actor, deref(in.Name), scope)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/keys/"+key.ID)
	writeJSON(w, http.StatusCreated, createdKey{keyBody: newKeyBody(key), Key: secret})
	return nil
}

// revokeKey revokes a key of the caller's organization, the caller's own
// included; revoking a revoked key is 204 again.
func (s *Server) revokeKey(w http.ResponseWriter, r *request) error {
	if _, err := s.app.RevokeKey(r.Context(), r.actor, r.params.ByName("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
