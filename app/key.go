package app

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/dmarcd/dmarcd/store"
)

// API keys. The store keeps their rules (at most store.MaxActiveKeys
// active keys, the name's length, hashed secrets, sessions ending with
// their key); here they are named as the front ends answer them.

// keyLimitMessage explains KeyLimit.
var keyLimitMessage = "an organization may have at most " + strconv.Itoa(store.MaxActiveKeys) +
	" active API keys: revoke one first"

// ListKeys returns one page of the actor's organization's keys: active
// ones first, then revoked ones, each newest first.
func (a *App) ListKeys(_ context.Context, actor Actor, p store.Page) ([]*store.APIKey, int, error) {
	if err := Authorize(actor, Read); err != nil {
		return nil, 0, err
	}
	return a.db.ListAPIKeysPage(actor.orgID(), p)
}

// CreateKey creates a key named name with scope (full or read) and
// returns it with its secret, which is shown this once. Errors: Invalid
// naming the name, the scope or both (the store's own words in the
// cause), KeyLimit.
func (a *App) CreateKey(_ context.Context, actor Actor, name, scope string) (*store.APIKey, string, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, "", err
	}
	sc, err := store.ParseScope(scope)
	if err != nil {
		fields := []FieldError{{Field: "scope", Message: "must be full or read"}}
		if strings.TrimSpace(name) == "" {
			fields = append([]FieldError{{Field: "name", Message: "is required"}}, fields...)
		}
		return nil, "", invalid(err, fields...)
	}
	key, secret, err := a.db.CreateAPIKey(actor.orgID(), name, sc)
	switch {
	case errors.Is(err, store.ErrLimit):
		return nil, "", &Error{Kind: KeyLimit, Msg: keyLimitMessage, Err: err}
	case errors.Is(err, store.ErrInvalid):
		msg := "is required"
		if strings.TrimSpace(name) != "" {
			msg = strings.TrimPrefix(AsError(err).Msg, "API key name ")
		}
		return nil, "", invalid(err, FieldError{Field: "name", Message: msg})
	}
	if err == nil {
		a.audit(actor, "key.create", key.Prefix+" "+key.Name)
	}
	return key, secret, err
}

// RevokeKey revokes key id at once and for good; revoking a revoked key
// is no error. A key may revoke itself. The operator outside an
// organization revokes any organization's key.
func (a *App) RevokeKey(_ context.Context, actor Actor, id string) (*store.APIKey, error) {
	if err := Authorize(actor, Write); err != nil {
		return nil, err
	}
	if actor.operator && actor.org == nil {
		return a.db.RevokeAPIKey(id)
	}
	key, err := a.db.RevokeOrgAPIKey(actor.orgID(), id)
	if err != nil {
		return nil, notFound(err, "API key")
	}
	a.audit(actor, "key.revoke", key.Prefix+" "+key.Name)
	return key, nil
}
