// Package admin is how the command line administers dmarcd: one Service
// interface with two implementations, Local over an open store (no server
// running) and Client over the admin Unix socket of a running server (which
// holds bbolt's exclusive file lock). The socket server is Handler.
package admin

import (
	"context"
	"io"
	"time"

	"github.com/dmarcd/dmarcd/ingest"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/senders"
	"github.com/dmarcd/dmarcd/store"
)

// Service is every administrative operation of the CLI. Errors wrap the
// store's kinds (store.ErrNotFound, ErrConflict, ErrInvalid, ErrLimit) in
// both implementations, so the CLI reports them alike.
type Service interface {
	CreateOrganization(ctx context.Context, name string, plan store.Plan) (*store.Organization, error)
	ListOrganizations(ctx context.Context) ([]*store.Organization, error)
	SetOrganizationPlan(ctx context.Context, orgRef string, plan store.Plan) (*store.Organization, error)
	// RenameOrganization and DeleteOrganization: organization.go.
	RenameOrganization(ctx context.Context, orgRef, name string) (*store.Organization, error)
	DeleteOrganization(ctx context.Context, orgRef string) (*store.OrganizationDeletion, error)
	// ListReports, ShowReport and ReportStats: reports.go.
	ListReports(ctx context.Context, q ReportQuery) (*ReportList, error)
	ShowReport(ctx context.Context, orgRef, id string) (*ReportDetail, error)
	ReportStats(ctx context.Context, q StatsQuery) (*StatsResult, error)
	CreateAPIKey(ctx context.Context, orgRef, name string, scope store.Scope) (*store.APIKey, string, error)
	ListAPIKeys(ctx context.Context, orgRef string) ([]*store.APIKey, error)
	RevokeAPIKey(ctx context.Context, id string) (*store.APIKey, error)
	// Backup writes a consistent copy of the whole database to w.
	Backup(ctx context.Context, w io.Writer) (int64, error)

	// Ingest runs one input (a report file or a mail) through the ingest
	// pipeline and returns once it is durably stored, found a duplicate,
	// or quarantined. orgRef (a name or id) restricts the domain lookup to
	// one organization; "" lets any organization's domain match. An error
	// means nothing was stored (ErrNotFound for an unknown orgRef).
	Ingest(ctx context.Context, r io.Reader, name, orgRef string) (*ingest.Result, error)
	// ListQuarantine returns one page of the quarantine, newest first,
	// and the total (ErrInvalid for a bad page).
	ListQuarantine(ctx context.Context, p store.Page) ([]*store.QuarantineEntry, int, error)
	// FindQuarantine returns one quarantine entry (ErrNotFound).
	FindQuarantine(ctx context.Context, id string) (*store.QuarantineEntry, error)
	// QuarantineRaw writes the bytes kept for an entry to w (ErrNotFound).
	QuarantineRaw(ctx context.Context, id string, w io.Writer) (int64, error)
	// RetryQuarantine ingests an entry's bytes again; the entry is deleted
	// when they now yield a report (ErrNotFound).
	RetryQuarantine(ctx context.Context, id string) (*ingest.Result, error)
	// DeleteQuarantine removes an entry and its bytes (ErrNotFound).
	DeleteQuarantine(ctx context.Context, id string) error
	// DeleteQuarantineBefore removes the entries received before t and
	// returns how many.
	DeleteQuarantineBefore(ctx context.Context, t time.Time) (int, error)

	Mailboxes
	Domains

	// Senders returns the sender groups and policy advice of a domain (a
	// name, or an id) over from..to. orgRef (a name or id) picks the
	// organization; "" finds the domain in any organization, ErrConflict
	// when several have it. ErrNotFound for an unknown domain or orgRef,
	// ErrInvalid for a bad range.
	Senders(ctx context.Context, orgRef, domain string, from, to time.Time) (*SendersView, error)
}

// Local is the Service over a store this process has opened.
type Local struct {
	DB *store.DB
	// FlushKeyUsage, when set, is called before keys are listed, so that a
	// running server's batched last_used_at stamps are shown.
	FlushKeyUsage func() error
	// Pipeline ingests imports and quarantine retries; without it those
	// operations fail.
	Pipeline *ingest.Pipeline
	// Mailboxes manages IMAP mailboxes; without it adding, removing and
	// polling one fail.
	Mailboxes *imapin.Service
	// Views computes the sender views; nil uses the embedded known-sender
	// map without SPF evaluation.
	Views *senders.Views
	// Domains adds and verifies domains with the API's rules; without it
	// those operations fail (listing and deleting need only DB).
	Domains DomainOps
}

var _ Service = (*Local)(nil)

// CreateOrganization creates an organization with the given plan.
func (l *Local) CreateOrganization(_ context.Context, name string, plan store.Plan) (*store.Organization, error) {
	return l.DB.CreateOrganization(name, plan)
}

// ListOrganizations lists every organization by name.
func (l *Local) ListOrganizations(context.Context) ([]*store.Organization, error) {
	return l.DB.ListOrganizations()
}

// SetOrganizationPlan changes the plan of the organization named or
// identified by orgRef.
func (l *Local) SetOrganizationPlan(_ context.Context, orgRef string, plan store.Plan) (*store.Organization, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return nil, err
	}
	return l.DB.SetOrganizationPlan(org.ID, plan)
}

// CreateAPIKey creates a key for the organization orgRef and returns it with
// its secret, which is not stored and cannot be shown again.
func (l *Local) CreateAPIKey(_ context.Context, orgRef, name string, scope store.Scope) (*store.APIKey, string, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return nil, "", err
	}
	return l.DB.CreateAPIKey(org.ID, name, scope)
}

// ListAPIKeys lists the keys of the organization orgRef, revoked ones too.
func (l *Local) ListAPIKeys(_ context.Context, orgRef string) ([]*store.APIKey, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return nil, err
	}
	if l.FlushKeyUsage != nil {
		if err := l.FlushKeyUsage(); err != nil {
			return nil, err
		}
	}
	return l.DB.ListAPIKeys(org.ID)
}

// RevokeAPIKey revokes the key ref names (its id, or its 8-character
// prefix when unique: see store.DB.ResolveAPIKey), at once and for good.
func (l *Local) RevokeAPIKey(_ context.Context, ref string) (*store.APIKey, error) {
	id, err := l.DB.ResolveAPIKey(ref)
	if err != nil {
		return nil, err
	}
	return l.DB.RevokeAPIKey(id)
}

// Backup writes a consistent hot copy of the database.
func (l *Local) Backup(_ context.Context, w io.Writer) (int64, error) {
	return l.DB.Backup(w)
}
