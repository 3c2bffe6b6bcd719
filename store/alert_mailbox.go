package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
)

// raiseMailboxAlert runs the mailbox rule (mailbox_failing) for rec after
// a failed poll at at, in the transaction that records the poll, and
// marks the run of failures alerted when it raises the alert. The alert
// names no domain.
func (db *DB) raiseMailboxAlert(tx *bolt.Tx, rec *mailboxRecord, at time.Time) error {
	m := alert.Mailbox{ID: rec.ID, Host: rec.Host, Username: rec.Username, Folder: rec.Folder,
		FailingSince: *rec.FailStart, Alerted: rec.FailAlerted}
	if rec.LastError != nil {
		m.LastError = *rec.LastError
	}
	c := db.AlertRules().EvaluateMailbox(&m, at)
	if c == nil {
		return nil
	}
	a, err := alertOf(c, rec.OrgID, "", db.now())
	if err != nil {
		return err
	}
	a.DomainID = nil
	if err := db.raiseAlert(tx, a); err != nil {
		return fmt.Errorf("mailbox_failing alert of mailbox %s: %w", rec.ID, err)
	}
	rec.FailAlerted = true
	return nil
}
