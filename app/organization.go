package app

import (
	"context"

	"github.com/dmarcd/dmarcd/store"
)

// Organizations: the operator's (Administer). Errors are the store's:
// Invalid for a bad name or plan, Conflict for a name taken, NotFound.

// CreateOrganization creates an organization on plan.
func (a *App) CreateOrganization(_ context.Context, actor Actor, name string, plan store.Plan) (*store.Organization, error) {
	if err := Authorize(actor, Administer); err != nil {
		return nil, err
	}
	return a.db.CreateOrganization(name, plan)
}

// ListOrganizations lists every organization by name.
func (a *App) ListOrganizations(_ context.Context, actor Actor) ([]*store.Organization, error) {
	if err := Authorize(actor, Administer); err != nil {
		return nil, err
	}
	return a.db.ListOrganizations()
}

// SetPlan puts the actor's organization on plan (owners and the
// operator).
func (a *App) SetPlan(_ context.Context, actor Actor, plan store.Plan) (*store.Organization, error) {
	if err := Authorize(actor, OwnOrganization); err != nil {
		return nil, err
	}
	return a.db.SetOrganizationPlan(actor.orgID(), plan)
}

// RenameOrganization gives the actor's organization a new name (owners
// and the operator).
func (a *App) RenameOrganization(_ context.Context, actor Actor, name string) (*store.Organization, error) {
	if err := Authorize(actor, OwnOrganization); err != nil {
		return nil, err
	}
	return a.db.RenameOrganization(actor.orgID(), name)
}

// DeleteOrganization deletes the actor's organization with its domains,
// reports, keys, webhooks, mailboxes, quarantine entries, memberships and
// audit log (owners and the operator).
func (a *App) DeleteOrganization(_ context.Context, actor Actor) (*store.OrganizationDeletion, error) {
	if err := Authorize(actor, OwnOrganization); err != nil {
		return nil, err
	}
	return a.db.DeleteOrganization(actor.orgID())
}
