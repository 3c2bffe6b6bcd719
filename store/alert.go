package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/alert"
	"github.com/dmarcd/dmarcd/store/internal/days"
)

// The alert types and severities are package alert's (alert.Type...,
// alert.Severity...): it decides which alerts exist. The store keeps them.

// The alert statuses.
const (
	// AlertPending: created, not yet delivered to every active webhook.
	AlertPending = "pending"
	// AlertSent: delivered to every active webhook of the organization.
	AlertSent = "sent"
	// AlertDismissed: dismissed through the API; final.
	AlertDismissed = "dismissed"
)

// FailureRef is what the alert rules need of a stored failure (forensic)
// report; the ingest commit that stores failure reports passes them to the
// rules. Geo is nil when unknown.
type FailureRef struct {
	ID, OrgID, DomainID, SourceIP string
	Geo                           *Geo
	ArrivalDate                   time.Time
}

// Alert is the API.md alert object. DomainID is nil for an alert about no
// particular domain; Details is a JSON object explaining the cause.
type Alert struct {
	ID          string          `json:"id"`
	DomainID    *string         `json:"domain_id"`
	OrgID       string          `json:"-"`
	Type        string          `json:"type"`
	Severity    string          `json:"severity"`
	Status      string          `json:"status"`
	Title       string          `json:"title"`
	Message     string          `json:"message"`
	Details     json.RawMessage `json:"details"`
	CreatedAt   time.Time       `json:"created_at"`
	SentAt      *time.Time      `json:"sent_at"`
	DismissedAt *time.Time      `json:"dismissed_at"`
}

// AlertFilter selects alerts for ListAlerts; empty fields select all.
type AlertFilter struct {
	Severity string
	Status   string
	DomainID string
	Page     Page
}

// ValidAlertSeverity reports whether s is info, warning or critical.
func ValidAlertSeverity(s string) bool { return alert.Rank(s) > 0 }

// ValidAlertStatus reports whether s is pending, sent or dismissed.
func ValidAlertStatus(s string) bool { return statusCode(s) != 0 }

// ListAlerts returns one page of the alerts of organization orgID that
// pass f, newest first, and how many pass in all. A page past the end is
// empty. It reads only index entries for the filters and decodes the
// alerts of the page. Errors: ErrInvalid for a page or limit below 1 or an
// unknown severity or status; ErrNotFound when f.DomainID is not a domain
// of the organization.
func (db *DB) ListAlerts(orgID string, f AlertFilter) ([]*Alert, int, error) {
	skip, err := f.Page.offset()
	if err != nil {
		return nil, 0, err
	}
	if f.Severity != "" && !ValidAlertSeverity(f.Severity) {
		return nil, 0, errorf(ErrInvalid, "severity must be info, warning or critical")
	}
	if f.Status != "" && !ValidAlertStatus(f.Status) {
		return nil, 0, errorf(ErrInvalid, "status must be pending, sent or dismissed")
	}
	alerts := []*Alert{}
	total := 0
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		if f.DomainID != "" {
			if _, err := getOrgDomain(tx, orgID, f.DomainID); err != nil {
				return err
			}
		}
		prefix := orgPrefix(orgID)
		c := tx.Bucket(bucketAlertsByOrg).Cursor()
		for k := lastWithPrefix(c, prefix); k != nil; k = prevWithPrefix(c, prefix) {
			if !f.matches(c.Bucket().Get(k)) {
				continue
			}
			if total >= skip && len(alerts) < f.Page.Limit {
				rec, err := getAlert(tx, idFromOrgTimeIDKey(k))
				if err != nil {
					return err
				}
				alerts = append(alerts, rec.alert())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list alerts", err)
	}
	return alerts, total, nil
}

// matches reports whether an index value passes the filter.
func (f *AlertFilter) matches(v []byte) bool {
	status, severity, domain := decodeAlertIndex(v)
	return (f.Status == "" || status == statusCode(f.Status)) &&
		(f.Severity == "" || severity == severityRank(f.Severity)) &&
		(f.DomainID == "" || domain == f.DomainID)
}

// DismissAlert sets alert id of organization orgID to dismissed, stamping
// dismissed_at, and returns it. Dismissing a dismissed alert changes
// nothing and returns it again. ErrNotFound also when it belongs to another
// organization or id is malformed.
func (db *DB) DismissAlert(orgID, id string) (*Alert, error) {
	var rec *alertRecord
	now := db.now()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getOrgAlert(tx, orgID, id); err != nil {
			return err
		}
		if rec.Status == AlertDismissed {
			return nil
		}
		rec.Status, rec.DismissedAt = AlertDismissed, &now
		return putAlert(tx, rec)
	})
	if err != nil {
		return nil, wrap("dismiss alert", err)
	}
	return rec.alert(), nil
}

// dismissStep bounds the alerts one transaction of DismissAlerts
// dismisses, so that a large "dismiss all" keeps other writers waiting
// only briefly.
const dismissStep = 1000

// DismissAlerts dismisses the alerts of organization orgID among ids, as
// DismissAlert does each, in transactions of up to dismissStep alerts
// (one commit, one fsync, each) rather than one per alert. Ids not found,
// malformed or of another organization are skipped; an id named twice
// counts once. It returns how many of ids are alerts of the
// organization, dismissed now or before. An error leaves the
// transactions already committed in place.
func (db *DB) DismissAlerts(orgID string, ids []string) (int, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	now := db.now()
	found := 0
	for start := 0; start < len(ids); start += dismissStep {
		chunk := ids[start:min(start+dismissStep, len(ids))]
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			n = 0
			for _, id := range chunk {
				rec, err := getOrgAlert(tx, orgID, id)
				switch {
				case errors.Is(err, ErrNotFound):
					continue
				case err != nil:
					return err
				}
				n++
				if rec.Status == AlertDismissed {
					continue
				}
				rec.Status, rec.DismissedAt = AlertDismissed, &now
				if err := putAlert(tx, rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return found, wrap("dismiss alerts", err)
		}
		found += n
	}
	return found, nil
}

// DeleteAlertsBefore deletes the alerts created before t, whatever their
// status, in transactions of bounded size, and returns how many it
// deleted.
func (db *DB) DeleteAlertsBefore(t time.Time) (int, error) {
	total := 0
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			var old []*alertRecord
			err := tx.Bucket(bucketOrgs).ForEach(func(org, _ []byte) error {
				prefix := orgPrefix(string(org))
				end := orgTimeIDKey(string(org), t, "")
				c := tx.Bucket(bucketAlertsByOrg).Cursor()
				for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) < 0 && len(old) < retentionStep; k, _ = c.Next() {
					rec, err := getAlert(tx, idFromOrgTimeIDKey(k))
					if err != nil {
						return err
					}
					old = append(old, rec)
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, rec := range old {
				if err := removeAlert(tx, rec); err != nil {
					return err
				}
			}
			n = len(old)
			return nil
		})
		total += n
		if err != nil {
			return total, wrap("delete old alerts", err)
		}
		if n < retentionStep {
			return total, nil
		}
	}
}

// PruneAlertState forgets what the rules no longer need: dedup entries of
// days before yesterday (a day's dedup matters only that day), and the
// source sets of days no report's window reaches any more. It works in
// transactions of bounded size and returns how many entries it deleted.
func (db *DB) PruneAlertState(now time.Time) (int, error) {
	const step = retentionStep
	today := days.Of(now)
	total := 0
	// Dedup keys start with their day: delete from the first key up to
	// yesterday's.
	limit := dedupKey(today-min(today, 1), "", "", "")[:4]
	for {
		n := 0
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketAlertDedup).Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k[:min(len(k), 4)], limit) < 0 && n < step; k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil || n < step {
			if err != nil {
				return total, wrap("prune alert dedup", err)
			}
			break
		}
	}
	// A report of day D looks at the sets of D-window .. D, and reports
	// are of yesterday or today: older sets serve no one.
	window := uint32(db.AlertRules().NewSourceDays) + 1
	if today <= window {
		return total, nil
	}
	oldest := today - window
	var after []byte
	for {
		// Look in a read transaction, so that a large index is scanned
		// without holding the writer; delete in a short write.
		var stale [][]byte
		var next []byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketAlertSources).Cursor()
			k, _ := c.First()
			if after != nil {
				k, _ = c.Seek(after)
			}
			for ; k != nil; k, _ = c.Next() {
				if len(stale) == step {
					next = bytes.Clone(k)
					break
				}
				if len(k) != idLen+4 || binary.BigEndian.Uint32(k[idLen:]) < oldest {
					stale = append(stale, bytes.Clone(k))
				}
			}
			return nil
		})
		n := 0
		if err == nil && len(stale) > 0 {
			err = db.bolt.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketAlertSources)
				for _, k := range stale {
					if b.Get(k) == nil {
						continue
					}
					if err := b.Delete(k); err != nil {
						return err
					}
					n++
				}
				return nil
			})
		}
		total += n
		if err != nil {
			return total, wrap("prune alert sources", err)
		}
		if next == nil {
			return total, nil
		}
		after = next
	}
}

// SetAlertRules replaces the rules used by the next commits. ErrInvalid as
// alert.Rules.Validate.
func (db *DB) SetAlertRules(r alert.Rules) error {
	if !r.Disabled {
		if err := r.Validate(); err != nil {
			return errorf(ErrInvalid, "%v", err)
		}
	}
	db.alerts.rules.Store(&r)
	return nil
}

// AlertRules returns the rules in use.
func (db *DB) AlertRules() alert.Rules {
	if r := db.alerts.rules.Load(); r != nil {
		return *r
	}
	return alert.DefaultRules()
}

// OnAlert sets fn to be called with every alert created from now on, after
// the transaction that created it committed (for metrics). fn must return
// quickly and must not write to the database; nil removes it.
func (db *DB) OnAlert(fn func(*Alert)) {
	if fn == nil {
		db.alerts.hook.Store(nil)
		return
	}
	db.alerts.hook.Store(&fn)
}

// DNSCheck is the outcome of one DNS change check of a domain, as package
// worker saw it and package alert judged it (alert.ClassifyDNSChange).
type DNSCheck struct {
	DomainID string
	// Seen is the Domain.LastDNSRecord the check compared with: the write
	// happens only while the domain still has it.
	Seen string
	// Record is what to remember as the domain's LastDNSRecord.
	Record string
	// Alert, when set, is raised for the domain, created now.
	Alert *alert.Candidate
	// Deactivate sets an active domain inactive (the reporting address is
	// no longer published).
	Deactivate bool
}

// RecordDNSCheck stores the outcome of a DNS change check in one
// transaction: the domain's LastDNSRecord, its status, and the alert, and
// returns the alert as stored (nil when none). Errors: ErrNotFound when the
// domain is gone; ErrConflict when its LastDNSRecord is no longer c.Seen (a
// concurrent check got there first: nothing is written); ErrInvalid for a
// malformed alert.
func (db *DB) RecordDNSCheck(c DNSCheck) (*Alert, error) {
	dom, err := db.FindDomainByID(c.DomainID)
	if err != nil {
		return nil, err
	}
	var raised *Alert
	now := db.now()
	err = db.domainVersions.changing(dom.OrgID, func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			rec, err := getDomain(tx, c.DomainID)
			if err != nil {
				return err
			}
			if rec.LastDNSRecord != c.Seen {
				return errorf(ErrConflict, "the domain's DNS record changed during the check")
			}
			rec.LastDNSRecord = c.Record
			if c.Deactivate && rec.Status == DomainActive {
				rec.Status = DomainInactive
			}
			if err := putDomain(tx, rec); err != nil {
				return err
			}
			if c.Alert == nil {
				return nil
			}
			a, err := alertOf(c.Alert, rec.OrgID, rec.ID, now)
			if err != nil {
				return err
			}
			if err := db.raiseAlert(tx, a); err != nil {
				return err
			}
			raised = a
			return nil
		})
	})
	if err != nil {
		return nil, wrap("record DNS check", err)
	}
	return raised, nil
}

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

// SenderStages returns the advice stage the sender-watch job
// (worker.SenderWatch) last stored for each of domainIDs, in one read
// transaction: the overview shows these instead of computing an advice per
// domain. A domain never evaluated, or whose entry is damaged, is absent.
func (db *DB) SenderStages(domainIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(domainIDs))
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAlertSenders)
		for _, id := range domainIDs {
			raw := b.Get(idKey(id))
			if raw == nil {
				continue
			}
			// Only the stage: the rest of the state is the rules' memory.
			var st struct {
				Stage string `json:"stage"`
			}
			if json.Unmarshal(raw, &st) == nil && st.Stage != "" {
				out[id] = st.Stage
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("read sender stages", err)
	}
	return out, nil
}
