package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// The mail outbox. Every mail dmarcd sends (alert mail, digests) waits
// here until the relay acknowledged it (250) or refused it for good (5xx),
// or its retries ran out. Entries are keyed by due time, so the sending
// job (worker.MailSender) reads what is due with one range scan; the
// message itself (recipient, subject, both parts, extra headers, its
// Message-ID) is in the entry, so a restart loses nothing and every
// attempt sends the same bytes. A send the relay acknowledged is marked
// in the transaction that follows the 250: the one window in which a mail
// can go out twice is a crash between the relay's 250 and that commit
// (at least once, never lost).
//
// Beside the outbox, the mail log keeps what became of each mail (queued,
// sent, failed, with the last error) for MailLogKeep, for the API, the CLI
// and the operator.

// The kinds of mail, OutgoingMail.Kind.
const (
	MailKindAlert  = "alert"
	MailKindDigest = "digest"
	MailKindTest   = "test"
)

// The states of a mail, MailStatus.Status.
const (
	// MailQueued: waiting for its first or next attempt.
	MailQueued = "queued"
	// MailSent: the relay acknowledged it (250).
	MailSent = "sent"
	// MailFailed: given up, after a permanent refusal (5xx) or when its
	// retries ran out; LastError says why.
	MailFailed = "failed"
)

// MailLogKeep is how long the mail log keeps a sent or failed mail.
const MailLogKeep = 30 * 24 * time.Hour

// OutgoingMail is one message to one recipient, as it is queued: what
// mailout.Message is made of, plus who it is for. The sender (From) and
// the Message-ID's host are the server's settings at each attempt; the
// Message-ID's local part is the entry's ID, so every attempt carries the
// same Message-ID.
type OutgoingMail struct {
	// ID is set by EnqueueMail (a time-ordered id).
	ID string `json:"id"`
	// OrgID is the organization the mail is about; "" for none (a test).
	OrgID string `json:"org_id,omitempty"`
	// Kind is MailKindAlert, MailKindDigest or MailKindTest.
	Kind string `json:"kind"`
	// To is the recipient, a bare address.
	To      string `json:"to"`
	Subject string `json:"subject"`
	// Text and HTML are the two parts; at least one is needed.
	Text string `json:"text,omitempty"`
	HTML string `json:"html,omitempty"`
	// ListUnsubscribe is the URL of the recipient's notification
	// settings; "" for none.
	ListUnsubscribe string `json:"list_unsubscribe,omitempty"`
	// Headers are further header fields (mailout.Message.Headers).
	Headers map[string]string `json:"headers,omitempty"`
	// CreatedAt is when it was queued: the message's Date.
	CreatedAt time.Time `json:"created_at"`
}

// mailRecord is an outbox entry: the mail and its attempt count.
type mailRecord struct {
	Mail    OutgoingMail `json:"mail"`
	Attempt int          `json:"attempt"` // the number of the next attempt, from 1
}

// MailStatus is what became of a mail, from the mail log.
type MailStatus struct {
	ID        string `json:"id"`
	OrgID     string `json:"-"`
	Kind      string `json:"kind"`
	To        string `json:"to"`
	Subject   string `json:"subject"`
	Status    string `json:"status"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error,omitempty"`
	// NextAttemptAt is set while queued.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	// DoneAt is when it was sent or given up.
	DoneAt *time.Time `json:"done_at,omitempty"`
}

// maxMailBytes bounds the text and HTML of one mail together.
const maxMailBytes = 512 << 10

// checkMail refuses a mail that could not be sent as it is: a malformed
// address, a subject or header value with a line break (header
// injection), no body, an unknown kind, too large.
func checkMail(m *OutgoingMail) error {
	to := strings.TrimSpace(m.To)
	a, err := mail.ParseAddress(to)
	if err != nil || a.Address != to || a.Name != "" || !strings.Contains(to, "@") || strings.ContainsAny(to, "\r\n<>") {
		return errorf(ErrInvalid, "%q is no mail address", m.To)
	}
	m.To = to
	switch m.Kind {
	case MailKindAlert, MailKindDigest, MailKindTest:
	default:
		return errorf(ErrInvalid, "unknown mail kind %q", m.Kind)
	}
	if m.OrgID != "" && !ValidID(m.OrgID) {
		return errorf(ErrInvalid, "malformed organization id")
	}
	values := []string{m.Subject, m.ListUnsubscribe}
	for k, v := range m.Headers {
		if k == "" || strings.ContainsAny(k, "\r\n: ") {
			return errorf(ErrInvalid, "header field name %q", k)
		}
		values = append(values, v)
	}
	for _, v := range values {
		if strings.ContainsAny(v, "\r\n\x00") || !utf8.ValidString(v) {
			return errorf(ErrInvalid, "a header value of the mail contains a line break or is not UTF-8")
		}
	}
	switch {
	case strings.TrimSpace(m.Subject) == "":
		return errorf(ErrInvalid, "the mail has no subject")
	case m.Text == "" && m.HTML == "":
		return errorf(ErrInvalid, "the mail has neither a text nor an HTML part")
	case len(m.Text)+len(m.HTML) > maxMailBytes:
		return errorf(ErrInvalid, "the mail is larger than %d bytes", maxMailBytes)
	}
	return nil
}

// mailKey is due (big-endian Unix nanoseconds) | mail id.
func mailKey(due time.Time, id string) []byte {
	k := make([]byte, 0, 8+idLen)
	k = binary.BigEndian.AppendUint64(k, timeKey(due))
	return append(k, id...)
}

// EnqueueMail queues m, due at once, and returns its status (queued). It
// sets m.ID and m.CreatedAt (now). The mail is in the file when
// EnqueueMail returns: it survives a restart and is sent by the next run
// of the sending job. ErrInvalid for a mail that cannot be sent as it is
// (see checkMail): a malformed address, a line break in the subject or a
// header value, no body, an unknown kind.
func (db *DB) EnqueueMail(m *OutgoingMail) (*MailStatus, error) {
	var st *MailStatus
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		st, err = enqueueMail(tx, m, db.now())
		return err
	})
	if err != nil {
		return nil, wrap("enqueue mail", err)
	}
	return st, nil
}

// enqueueMail queues m in tx, due at now (see EnqueueMail).
func enqueueMail(tx *bolt.Tx, m *OutgoingMail, now time.Time) (*MailStatus, error) {
	if err := checkMail(m); err != nil {
		return nil, err
	}
	m.ID, m.CreatedAt = NewID(), now
	m.Headers = maps.Clone(m.Headers)
	raw, err := json.Marshal(&mailRecord{Mail: *m, Attempt: 1})
	if err != nil {
		return nil, err
	}
	key := mailKey(now, m.ID)
	if err := tx.Bucket(bucketMailOutbox).Put(key, raw); err != nil {
		return nil, err
	}
	st := &MailStatus{ID: m.ID, OrgID: m.OrgID, Kind: m.Kind, To: m.To, Subject: m.Subject, Status: MailQueued,
		NextAttemptAt: &now, CreatedAt: now}
	return st, putMailStatus(tx, st)
}

// statusRecord is a MailStatus as the log stores it (with its org).
type statusRecord struct {
	MailStatus
	Org string `json:"org_id,omitempty"`
}

func putMailStatus(tx *bolt.Tx, st *MailStatus) error {
	raw, err := json.Marshal(statusRecord{MailStatus: *st, Org: st.OrgID})
	if err != nil {
		return err
	}
	return tx.Bucket(bucketMailLog).Put(idKey(st.ID), raw)
}

func getMailStatus(tx *bolt.Tx, id string) (*MailStatus, error) {
	raw := tx.Bucket(bucketMailLog).Get(idKey(id))
	if raw == nil {
		return nil, errorf(ErrNotFound, "mail not found")
	}
	var rec statusRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("%w: mail log entry %s: %v", errCorrupt, id, err)
	}
	rec.MailStatus.OrgID = rec.Org
	return &rec.MailStatus, nil
}

// DueMail is an outbox entry due for an attempt.
type DueMail struct {
	Mail    OutgoingMail
	Attempt int // the number of this attempt, from 1
	Due     time.Time
	key     []byte
}

// DueMails returns up to max outbox entries due at now, earliest first.
func (db *DB) DueMails(now time.Time, max int) ([]*DueMail, error) {
	var out []*DueMail
	end := binary.BigEndian.AppendUint64(nil, timeKey(now)+1)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMailOutbox).Cursor()
		for k, v := c.First(); k != nil && bytes.Compare(k, end) < 0 && len(out) < max; k, v = c.Next() {
			var rec mailRecord
			if len(k) != 8+idLen || json.Unmarshal(v, &rec) != nil {
				return fmt.Errorf("%w: mail outbox entry %x", errCorrupt, k)
			}
			out = append(out, &DueMail{Mail: rec.Mail, Attempt: rec.Attempt,
				Due: time.Unix(0, int64(binary.BigEndian.Uint64(k))).UTC(), key: bytes.Clone(k)})
		}
		return nil
	})
	return out, wrap("due mail", err)
}

// MailOutboxDepth returns the number of mails waiting in the outbox.
func (db *DB) MailOutboxDepth() (int, error) {
	var n int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketMailOutbox).Stats().KeyN
		return nil
	})
	return n, wrap("mail outbox depth", err)
}

// MailAttempt is the outcome of one attempt at a DueMail.
type MailAttempt struct {
	Mail *DueMail
	// Sent: the relay answered 250 to the message.
	Sent bool
	// Permanent: the relay refused it with a 5xx answer; no retry.
	Permanent bool
	// Error says what went wrong (no secret in it); "" when Sent.
	Error string
	At    time.Time
}

// FinishMail records one attempt in one transaction and returns the mail's
// status after it: sent (the entry is gone), failed (a permanent refusal,
// or the last of len(retryDelays)+1 attempts failed: the entry is gone),
// or queued again retryDelays[n-1] after attempt n. An entry no longer in
// the outbox (finished already) is left alone: its status is returned as
// it is, so a send is never recorded twice.
func (db *DB) FinishMail(a MailAttempt, retryDelays []time.Duration) (*MailStatus, error) {
	var st *MailStatus
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		st, err = finishMail(tx, a, retryDelays)
		return err
	})
	if err != nil {
		return nil, wrap("finish mail", err)
	}
	return st, nil
}

func finishMail(tx *bolt.Tx, a MailAttempt, delays []time.Duration) (*MailStatus, error) {
	d := a.Mail
	ob := tx.Bucket(bucketMailOutbox)
	raw := ob.Get(d.key)
	st, err := getMailStatus(tx, d.Mail.ID)
	if err != nil && !isKind(err, ErrNotFound) {
		return nil, err
	}
	if raw == nil {
		return st, err
	}
	var rec mailRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("%w: mail outbox entry %x", errCorrupt, d.key)
	}
	if err := ob.Delete(d.key); err != nil {
		return nil, err
	}
	if st == nil { // the log entry went (pruned); keep what we know
		m := rec.Mail
		st = &MailStatus{ID: m.ID, OrgID: m.OrgID, Kind: m.Kind, To: m.To, Subject: m.Subject, CreatedAt: m.CreatedAt}
	}
	at := a.At.UTC().Truncate(time.Second)
	st.Attempts = rec.Attempt
	st.NextAttemptAt = nil
	switch {
	case a.Sent:
		st.Status, st.LastError, st.DoneAt = MailSent, "", &at
	case a.Permanent || rec.Attempt > len(delays):
		st.Status, st.LastError, st.DoneAt = MailFailed, a.Error, &at
	default:
		next := at.Add(delays[rec.Attempt-1])
		st.Status, st.LastError, st.NextAttemptAt = MailQueued, a.Error, &next
		rec.Attempt++
		raw, err := json.Marshal(&rec)
		if err != nil {
			return nil, err
		}
		if err := ob.Put(mailKey(next, rec.Mail.ID), raw); err != nil {
			return nil, err
		}
	}
	return st, putMailStatus(tx, st)
}

// MailLog returns up to limit entries of the mail log, newest first: of
// organization orgID, or of every organization (and none) when orgID is
// "".
func (db *DB) MailLog(orgID string, limit int) ([]*MailStatus, error) {
	out := []*MailStatus{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMailLog).Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
			st, err := getMailStatus(tx, string(k))
			if err != nil {
				return err
			}
			if orgID == "" || st.OrgID == orgID {
				out = append(out, st)
			}
		}
		return nil
	})
	return out, wrap("mail log", err)
}

// MailStatusOf returns the status of mail id. ErrNotFound when the log has
// no such mail.
func (db *DB) MailStatusOf(id string) (*MailStatus, error) {
	var st *MailStatus
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		st, err = getMailStatus(tx, id)
		return err
	})
	return st, wrap("mail status", err)
}

// PruneMailLog deletes the log entries of mail sent or given up before
// t, and returns how many.
func (db *DB) PruneMailLog(t time.Time) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		var dead [][]byte
		c := tx.Bucket(bucketMailLog).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			st, err := getMailStatus(tx, string(k))
			if err != nil {
				return err
			}
			if st.CreatedAt.After(t) {
				break // ids are time-ordered: the rest are newer
			}
			if st.DoneAt != nil && st.DoneAt.Before(t) {
				dead = append(dead, bytes.Clone(k))
			}
		}
		for _, k := range dead {
			if err := tx.Bucket(bucketMailLog).Delete(k); err != nil {
				return err
			}
		}
		n = len(dead)
		return nil
	})
	return n, wrap("prune mail log", err)
}
