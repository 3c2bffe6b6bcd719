// Package admin is how the command line administers dmarcd: one Service
// interface with two implementations, Local over an open store (no server
// running) and Client over the admin Unix socket of a running server (which
// holds bbolt's exclusive file lock). The socket server is Handler.
package admin

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/digest"
	"github.com/dmarcd/dmarcd/export/clickhouse"
	"github.com/dmarcd/dmarcd/ingest"
	"github.com/dmarcd/dmarcd/ingest/imports"
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

	// Import runs the files, folders and mbox files of req through the
	// ingest pipeline, as imports.Run does, and returns the summary; see
	// ImportRequest and import.go.
	Import(ctx context.Context, req ImportRequest) (*imports.Summary, error)
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
	// IngestRetention returns the retention windows the pipeline applies
	// to what Ingest stores: reports older are left out.
	IngestRetention(ctx context.Context) (Retention, error)

	Mailboxes
	Domains
	Mail
	Exports
	Digests

	// Senders returns the sender groups and policy advice of a domain (a
	// name, or an id) over from..to. orgRef (a name or id) picks the
	// organization; "" finds the domain in any organization, ErrConflict
	// when several have it. ErrNotFound for an unknown domain or orgRef,
	// ErrInvalid for a bad range.
	Senders(ctx context.Context, orgRef, domain string, from, to time.Time) (*SendersView, error)
}

// Local is the Service over a store this process has opened. It runs
// the operations of the application layer as the operator.
type Local struct {
	DB *store.DB
	// App runs the operations (and batches the running server's key
	// usage, flushed before keys are listed); nil builds one over DB
	// alone, without IMAP intake: adding, changing and polling mailboxes
	// then fail.
	App *app.App
	// Pipeline ingests imports (its Ingest is the ingest.IngestFunc of
	// every input) and quarantine retries; without it those operations
	// fail.
	Pipeline *ingest.Pipeline
	// Views computes the sender views; nil uses the embedded known-sender
	// map without SPF evaluation.
	Views *senders.Views
	// Export is the running server's ClickHouse sink; nil without one
	// (the export operations then work on the cursor in the file).
	Export *clickhouse.Sink

	once sync.Once
	def  *app.App
}

var _ Service = (*Local)(nil)

// app is the application layer: App, or one over DB.
func (l *Local) app() *app.App {
	if l.App != nil {
		return l.App
	}
	l.once.Do(func() {
		l.def = app.New(app.Config{Store: l.DB, Digests: &digest.Builder{DB: l.DB, Views: l.Views}})
	})
	return l.def
}

// operator is the operator acting within the organization orgRef names.
func (l *Local) operator(orgRef string) (app.Actor, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return app.Actor{}, err
	}
	return app.Operator(org), nil
}

// asStoreError gives the application layer's refusals the store's kinds,
// which the CLI reports and the socket carries: one that wraps a store
// error is that error; a field sent wrong, or a mailbox that could not be
// reached, is ErrInvalid with its message.
func asStoreError(err error) error {
	if err == nil {
		return nil
	}
	if se, ok := errors.AsType[*store.Error](err); ok {
		return se
	}
	switch app.KindOf(err) {
	case app.Invalid, app.Unreachable:
		return &store.Error{Kind: store.ErrInvalid, Msg: err.Error()}
	}
	return err
}

// CreateOrganization creates an organization with the given plan.
func (l *Local) CreateOrganization(ctx context.Context, name string, plan store.Plan) (*store.Organization, error) {
	return l.app().CreateOrganization(ctx, app.Operator(nil), name, plan)
}

// ListOrganizations lists every organization by name.
func (l *Local) ListOrganizations(ctx context.Context) ([]*store.Organization, error) {
	return l.app().ListOrganizations(ctx, app.Operator(nil))
}

// SetOrganizationPlan changes the plan of the organization named or
// identified by orgRef.
func (l *Local) SetOrganizationPlan(ctx context.Context, orgRef string, plan store.Plan) (*store.Organization, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, err
	}
	return l.app().SetPlan(ctx, op, plan)
}

// CreateAPIKey creates a key for the organization orgRef and returns it with
// its secret, which is not stored and cannot be shown again.
func (l *Local) CreateAPIKey(ctx context.Context, orgRef, name string, scope store.Scope) (*store.APIKey, string, error) {
	op, err := l.operator(orgRef)
	if err != nil {
		return nil, "", err
	}
	key, secret, err := l.app().CreateKey(ctx, op, name, string(scope))
	return key, secret, asStoreError(err)
}

// ListAPIKeys lists the keys of the organization orgRef in creation
// order, revoked ones too, with the usage a running server has batched.
func (l *Local) ListAPIKeys(_ context.Context, orgRef string) ([]*store.APIKey, error) {
	org, err := l.DB.FindOrganization(orgRef)
	if err != nil {
		return nil, err
	}
	if err := l.app().FlushKeyUsage(); err != nil {
		return nil, err
	}
	return l.DB.ListAPIKeys(org.ID)
}

// RevokeAPIKey revokes the key ref names (its id, or its 8-character
// prefix when unique: see store.DB.ResolveAPIKey), at once and for good.
func (l *Local) RevokeAPIKey(ctx context.Context, ref string) (*store.APIKey, error) {
	id, err := l.DB.ResolveAPIKey(ref)
	if err != nil {
		return nil, err
	}
	return l.app().RevokeKey(ctx, app.Operator(nil), id)
}

// Backup writes a consistent hot copy of the database.
func (l *Local) Backup(_ context.Context, w io.Writer) (int64, error) {
	return l.DB.Backup(w)
}
