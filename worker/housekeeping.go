package worker

import (
	"context"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Housekeeping jobs: small, frequent, and each one call.

// Their intervals.
const (
	// DefaultSessionSweepEvery is how often expired web sessions are
	// deleted.
	DefaultSessionSweepEvery = time.Hour
	// DefaultKeyUsageEvery is how often the batched last-used stamps of
	// API keys are written.
	DefaultKeyUsageEvery = time.Minute
)

// SessionSweep is the job that deletes web sessions past their idle
// timeout or maximum age, so that abandoned ones do not stay in the file
// (a session used after expiry goes at once anyway).
type SessionSweep struct {
	Store *store.DB
}

// Job returns the job to give the Scheduler: hourly.
func (j *SessionSweep) Job() Job {
	return Job{Name: "session-sweep", Every: DefaultSessionSweepEvery, Run: j.Run}
}

// Run deletes the sessions expired at now.
func (j *SessionSweep) Run(_ context.Context, now time.Time) error {
	_, err := j.Store.SweepSessions(now)
	return err
}

// KeyUsageFlusher writes the last-used stamps of API keys batched in
// memory (*app.App).
type KeyUsageFlusher interface {
	FlushKeyUsage() error
}

// KeyUsage is the job that writes the batched last-used stamps of API
// keys, so that a key's last_used_at trails its use by a minute at most.
type KeyUsage struct {
	Keys KeyUsageFlusher
}

// Job returns the job to give the Scheduler: every minute.
func (j *KeyUsage) Job() Job {
	return Job{Name: "flush-key-usage", Every: DefaultKeyUsageEvery, Run: j.Run}
}

// Run writes the stamps batched so far.
func (j *KeyUsage) Run(context.Context, time.Time) error { return j.Keys.FlushKeyUsage() }

// DefaultAuditRetention is how long audit log entries are kept
// (--audit-retention).
const DefaultAuditRetention = 400 * 24 * time.Hour

// AuditSweeper deletes audit entries past their retention, with the
// one-time links long used or expired (*app.App).
type AuditSweeper interface {
	SweepAudit(retention time.Duration) (int, error)
}

// AuditRetention is the job that keeps the audit log to its retention
// (docs/people.md).
type AuditRetention struct {
	Audit AuditSweeper
	// Retention is how long entries are kept; 0 keeps them forever (the
	// job is then not scheduled).
	Retention time.Duration
}

// Job returns the job to give the Scheduler: hourly.
func (j *AuditRetention) Job() Job {
	return Job{Name: "audit-retention", Every: time.Hour, Run: j.Run}
}

// Run deletes the entries older than the retention.
func (j *AuditRetention) Run(context.Context, time.Time) error {
	_, err := j.Audit.SweepAudit(j.Retention)
	return err
}
