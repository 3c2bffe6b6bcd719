package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

// What the sender rules (alert/sender.go: new_sender, policy_ready)
// remember of a domain between evaluations, and how their alerts are
// raised. The rules run in a scheduler job (worker.SenderWatch), not in
// the ingest commit; the job reads the state here, asks the rules, and
// hands back the alerts with the next state, which RecordSenderCheck
// writes in one transaction: a restart between two evaluations neither
// loses an alert nor raises one twice.

// SenderAlertState returns what the sender rules remember of domain id:
// the zero state when it was never evaluated. A damaged entry reads as
// the zero state (it is a hint: the next evaluation is then a first one
// and raises nothing).
func (db *DB) SenderAlertState(domainID string) (alert.SenderState, error) {
	var st alert.SenderState
	err := db.bolt.View(func(tx *bolt.Tx) error {
		st = decodeSenderState(tx.Bucket(bucketAlertSenders).Get(idKey(domainID)))
		return nil
	})
	if err != nil {
		return st, wrap("read sender alert state", err)
	}
	return st, nil
}

func decodeSenderState(raw []byte) alert.SenderState {
	var st alert.SenderState
	if raw != nil && json.Unmarshal(raw, &st) != nil {
		return alert.SenderState{}
	}
	return st
}

// FirstSourceDay returns the UTC day of domain id's oldest per-source
// roll-up (the first day of its reports still kept), and false when it has
// none. One seek: cheap for every domain every hour.
func (db *DB) FirstSourceDay(domainID string) (time.Time, bool, error) {
	var day time.Time
	found := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		prefix := []byte(domainID)
		k, _ := tx.Bucket(bucketSourceRollups).Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return nil
		}
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("source roll-up key of length %d: %w", len(k), errCorrupt)
		}
		day, found = days.Start(binary.BigEndian.Uint32(k[len(prefix):])), true
		return nil
	})
	if err != nil {
		return time.Time{}, false, wrap("first source day", err)
	}
	return day, found, nil
}

// SenderCheck is the outcome of one evaluation of the sender rules for a
// domain (alert.Rules.EvaluateSenders).
type SenderCheck struct {
	DomainID string
	// Seen is the state the evaluation started from: the write happens
	// only while the domain still has it.
	Seen alert.SenderState
	// Next is the state to remember.
	Next alert.SenderState
	// Alerts are raised for the domain, created now.
	Alerts []alert.Candidate
}

// RecordSenderCheck stores the outcome of an evaluation of the sender
// rules in one transaction: the next state, and the alerts (each with its
// dedup entry and its webhook deliveries, as every rule's), and returns
// the alerts as stored. Errors: ErrNotFound when the domain is gone;
// ErrConflict when its state is no longer c.Seen (another evaluation got
// there first: nothing is written); ErrInvalid for a malformed alert.
func (db *DB) RecordSenderCheck(c SenderCheck) ([]*Alert, error) {
	seen, err := json.Marshal(c.Seen)
	if err != nil {
		return nil, wrap("record sender check", err)
	}
	next, err := json.Marshal(c.Next)
	if err != nil {
		return nil, wrap("record sender check", err)
	}
	var raised []*Alert
	now := db.now()
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		raised = nil
		dom, err := getDomain(tx, c.DomainID)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketAlertSenders)
		cur, err := json.Marshal(decodeSenderState(b.Get(idKey(dom.ID))))
		if err != nil {
			return err
		}
		if !bytes.Equal(cur, seen) {
			return errorf(ErrConflict, "the domain's sender alert state changed during the check")
		}
		if err := b.Put(idKey(dom.ID), next); err != nil {
			return err
		}
		e := &ruleEval{db: db, tx: tx, rules: db.AlertRules(), now: now, today: days.Of(now),
			dedup: tx.Bucket(bucketAlertDedup), counts: map[string]int{}}
		for i := range c.Alerts {
			cand := &c.Alerts[i]
			if cand.Dedup.DomainID != "" && cand.Dedup.DomainID != dom.ID {
				return errorf(ErrInvalid, "a %s alert of another domain", cand.Type)
			}
			a, err := e.raiseAlert(cand, dom.OrgID, dom.ID)
			if err != nil {
				return err
			}
			raised = append(raised, a)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("record sender check", err)
	}
	return raised, nil
}
