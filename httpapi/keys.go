package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// The API key endpoints (API.md, "API keys"). The rules (5 active keys,
// scopes, name length, tenant isolation, sessions ending with their key)
// live in the store, which the CLI and the web interface call too.

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
	keys, total, err := s.store.ListAPIKeysPage(r.org.ID, store.Page{Page: p.Page, Limit: p.Limit})
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
	var details []FieldError
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		details = append(details, FieldError{Field: "name", Message: "is required"})
	}
	scope := store.ScopeFull
	if in.Scope != nil {
		sc, err := store.ParseScope(*in.Scope)
		if err != nil {
			details = append(details, FieldError{Field: "scope", Message: "must be full or read"})
		}
		scope = sc
	}
	if len(details) > 0 {
		return validationFailed(details)
	}
	key, secret, err := s.store.CreateAPIKey(r.org.ID, *in.Name, scope)
	switch {
	case errors.Is(err, store.ErrLimit):
		return &Error{Status: http.StatusForbidden, Code: "key_limit_exceeded", Message: keyLimitMessage}
	case errors.Is(err, store.ErrInvalid):
		return validationFailed([]FieldError{{Field: "name", Message: strings.TrimPrefix(storeMsg(err), "API key name ")}})
	case err != nil:
		return err
	}
	w.Header().Set("Location", "/api/v1/keys/"+key.ID)
	writeJSON(w, http.StatusCreated, createdKey{keyBody: newKeyBody(key), Key: secret})
	return nil
}

// keyLimitMessage explains key_limit_exceeded.
var keyLimitMessage = "an organization may have at most " + strconv.Itoa(store.MaxActiveKeys) +
	" active API keys: revoke one first"

// revokeKey revokes a key of the caller's organization, the caller's own
// included; revoking a revoked key is 204 again.
func (s *Server) revokeKey(w http.ResponseWriter, r *request) error {
	if _, err := s.store.RevokeOrgAPIKey(r.org.ID, strings.ToLower(r.params.ByName("id"))); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errNotFound("API key not found")
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// validationFailed is one 422 naming every invalid field.
func validationFailed(details []FieldError) *Error {
	msgs := make([]string, len(details))
	for i, d := range details {
		msgs[i] = "invalid " + d.Field + ": " + d.Message
	}
	return &Error{Status: http.StatusUnprocessableEntity, Code: "validation_failed",
		Message: strings.Join(msgs, "; "), Details: details}
}

// storeMsg is the client-facing message of a store error.
func storeMsg(err error) string {
	var se *store.Error
	if errors.As(err, &se) {
		return se.Msg
	}
	return "invalid"
}
