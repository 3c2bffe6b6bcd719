package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	bolt "go.etcd.io/bbolt"
)

// Mailbox is an IMAP mailbox of an organization that dmarcd reads reports
// from. Its JSON is the API's (API.md "Mailboxes (IMAP intake)"); its
// credentials are never part of it: the store keeps them as an opaque,
// encrypted value (see CreateMailbox and FindMailboxSecrets).
type Mailbox struct {
	ID               string     `json:"id"`
	OrgID            string     `json:"-"`
	Host             string     `json:"host"`
	Port             int        `json:"port"`
	Security         string     `json:"security"`
	Username         string     `json:"username"`
	Auth             string     `json:"auth"`
	Folder           string     `json:"folder"`
	ArchiveFolder    string     `json:"archive_folder"`
	IsActive         bool       `json:"is_active"`
	LastPollAt       *time.Time `json:"last_poll_at"`
	LastError        *string    `json:"last_error"`
	MessagesImported int64      `json:"messages_imported"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	// FailingSince is when the current run of failed polls began (nil
	// when the last poll worked), for the web interface; not in the API.
	FailingSince *time.Time `json:"-"`
}

// Mailbox security and auth values.
const (
	SecurityTLS      = "tls"
	SecurityStartTLS = "starttls"
	SecurityPlain    = "plain"
	AuthPassword     = "password"
	AuthOAuth2       = "oauth2"
)

// Mailbox field limits.
const (
	maxMailboxHostLen   = 253
	maxMailboxFieldLen  = 320 // user names are mail addresses
	maxMailboxFolderLen = 1000
	maxMailboxSecrets   = 64 << 10
)

// MailboxUpdate holds the fields an update changes; nil leaves a field as
// it is. Secrets, when set, replaces the stored credentials.
type MailboxUpdate struct {
	Host          *string
	Port          *int
	Security      *string
	Username      *string
	Auth          *string
	Folder        *string
	ArchiveFolder *string
	IsActive      *bool
	Secrets       []byte
}

// MailboxState is where reading a mailbox's folder has got to: every
// message with a UID up to LastUID under UIDValidity is done.
type MailboxState struct {
	UIDValidity uint32
	LastUID     uint32
}

// MailboxPoll is the outcome of one poll, for the mailbox's status. The
// mails it imported are counted as each is done (MarkMailboxDone).
type MailboxPoll struct {
	At    time.Time
	Error string // "" clears last_error
}

// mailboxRecord is how a mailbox is stored, its sealed credentials included.
type mailboxRecord struct {
	Mailbox
	OrgID   string `json:"org_id"`
	Secrets []byte `json:"secrets"`
	// FailStart and FailAlerted are the mailbox_failing rule's state: when
	// the current run of failed polls began (nil: the last poll worked),
	// and whether the alert was raised for it.
	FailStart   *time.Time `json:"failing_since,omitempty"`
	FailAlerted bool       `json:"failing_alerted,omitempty"`
}

// checkMailbox is the store's own guard on the fields; the policy checks
// (plaintext allowed, addresses allowed, a working login) are the caller's.
func checkMailbox(m *Mailbox) error {
	m.Host = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(m.Host), "."))
	switch {
	case m.Host == "" || len(m.Host) > maxMailboxHostLen || strings.ContainsAny(m.Host, " /@\\[]") || hasControl(m.Host):
		return errorf(ErrInvalid, "host must be a host name or IP address")
	case m.Port < 1 || m.Port > 65535:
		return errorf(ErrInvalid, "port must be between 1 and 65535")
	case m.Security != SecurityTLS && m.Security != SecurityStartTLS && m.Security != SecurityPlain:
		return errorf(ErrInvalid, "security must be tls, starttls or plain")
	case m.Auth != AuthPassword && m.Auth != AuthOAuth2:
		return errorf(ErrInvalid, "auth must be password or oauth2")
	case m.Username == "" || len(m.Username) > maxMailboxFieldLen || hasControl(m.Username):
		return errorf(ErrInvalid, "username must be 1 to %d characters without control characters", maxMailboxFieldLen)
	case m.Folder == "" || len(m.Folder) > maxMailboxFolderLen || hasControl(m.Folder):
		return errorf(ErrInvalid, "folder must be 1 to %d characters without control characters", maxMailboxFolderLen)
	case len(m.ArchiveFolder) > maxMailboxFolderLen || hasControl(m.ArchiveFolder):
		return errorf(ErrInvalid, "archive_folder must be at most %d characters without control characters", maxMailboxFolderLen)
	case m.ArchiveFolder == m.Folder:
		return errorf(ErrInvalid, "archive_folder must differ from folder (empty leaves mail in place)")
	}
	return nil
}

// CheckMailbox applies the store's rules on a mailbox's fields (those
// CreateMailbox and UpdateMailbox apply) and normalizes its host, so that a
// caller can refuse bad input before it connects anywhere. Errors are
// ErrInvalid, their message starting with the field's name.
func CheckMailbox(m *Mailbox) error { return checkMailbox(m) }

func hasControl(s string) bool { return strings.IndexFunc(s, unicode.IsControl) >= 0 }

func checkSecrets(s []byte) error {
	if len(s) == 0 || len(s) > maxMailboxSecrets {
		return errorf(ErrInvalid, "mailbox credentials are missing or too large")
	}
	return nil
}

// CreateMailbox stores m, active, with its sealed credentials. The caller
// sets OrgID and the connection fields (and has tried a login); the store
// sets ID, IsActive, CreatedAt and UpdatedAt and writes them back into m.
// Errors: ErrInvalid for a bad field or missing credentials, ErrNotFound
// for an unknown organization.
func (db *DB) CreateMailbox(m *Mailbox, secrets []byte) error {
	if m == nil {
		return errorf(ErrInvalid, "mailbox is required")
	}
	rec := &mailboxRecord{Mailbox: *m, OrgID: m.OrgID, Secrets: bytes.Clone(secrets)}
	if err := checkMailbox(&rec.Mailbox); err != nil {
		return err
	}
	if err := checkSecrets(secrets); err != nil {
		return err
	}
	now := db.now()
	rec.ID, rec.IsActive, rec.CreatedAt, rec.UpdatedAt = NewID(), true, now, now
	rec.LastPollAt, rec.LastError, rec.MessagesImported = nil, nil, 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, rec.OrgID); err != nil {
			return err
		}
		if err := putMailbox(tx, rec); err != nil {
			return err
		}
		return tx.Bucket(bucketMailboxesByOrg).Put(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID), nil)
	})
	if err != nil {
		return wrap("create mailbox", err)
	}
	*m = *rec.mailbox()
	return nil
}

// FindMailbox returns mailbox id of organization orgID. ErrNotFound also
// when it belongs to another organization or id is malformed.
func (db *DB) FindMailbox(orgID, id string) (*Mailbox, error) {
	m, _, err := db.FindMailboxSecrets(orgID, id)
	return m, err
}

// FindMailboxSecrets returns the mailbox (as FindMailbox) and its sealed
// credentials.
func (db *DB) FindMailboxSecrets(orgID, id string) (*Mailbox, []byte, error) {
	var rec *mailboxRecord
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		rec, err = getOrgMailbox(tx, orgID, id)
		return err
	})
	if err != nil {
		return nil, nil, wrap("find mailbox", err)
	}
	return rec.mailbox(), rec.Secrets, nil
}

// ListMailboxes returns one page of the mailboxes of organization orgID,
// newest first, and how many it has in all. Errors: ErrInvalid for a page
// or limit below 1, ErrNotFound for an unknown organization.
func (db *DB) ListMailboxes(orgID string, p Page) ([]*Mailbox, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	out := []*Mailbox{}
	total := 0
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		prefix := orgPrefix(orgID)
		c := tx.Bucket(bucketMailboxesByOrg).Cursor()
		for k := lastWithPrefix(c, prefix); k != nil; k = prevWithPrefix(c, prefix) {
			if total >= skip && len(out) < p.Limit {
				rec, err := getMailbox(tx, idFromOrgTimeIDKey(k))
				if err != nil {
					return err
				}
				out = append(out, rec.mailbox())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list mailboxes", err)
	}
	return out, total, nil
}

// ActiveMailboxes returns every active mailbox of every organization with
// its sealed credentials, for the poller.
func (db *DB) ActiveMailboxes() ([]*Mailbox, [][]byte, error) {
	var boxes []*Mailbox
	var secrets [][]byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMailboxes).ForEach(func(k, v []byte) error {
			rec := new(mailboxRecord)
			if err := json.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("decode mailbox %s: %w", k, err)
			}
			if rec.IsActive {
				boxes = append(boxes, rec.mailbox())
				secrets = append(secrets, rec.Secrets)
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, wrap("list active mailboxes", err)
	}
	return boxes, secrets, nil
}

// UpdateMailbox applies u to mailbox id of organization orgID and returns
// the result. A change of host, port, username or folder forgets where
// reading had got to, so the new folder is read from its start. Errors:
// ErrNotFound as FindMailbox, ErrInvalid for a bad field.
func (db *DB) UpdateMailbox(orgID, id string, u MailboxUpdate) (*Mailbox, error) {
	if u.Secrets != nil {
		if err := checkSecrets(u.Secrets); err != nil {
			return nil, err
		}
	}
	now := db.now()
	var rec *mailboxRecord
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getOrgMailbox(tx, orgID, id); err != nil {
			return err
		}
		before := rec.Mailbox
		u.Apply(&rec.Mailbox)
		if err := checkMailbox(&rec.Mailbox); err != nil {
			return err
		}
		if u.Secrets != nil {
			rec.Secrets = bytes.Clone(u.Secrets)
		}
		rec.UpdatedAt = now
		if rec.Host != before.Host || rec.Port != before.Port || rec.Username != before.Username || rec.Folder != before.Folder {
			if err := tx.Bucket(bucketMailboxState).Delete(idKey(rec.ID)); err != nil {
				return err
			}
		}
		// Someone acted on the mailbox: a run of failures (mailbox_failing)
		// starts again from the next failed poll.
		if rec.Host != before.Host || rec.Port != before.Port || rec.Security != before.Security ||
			rec.Username != before.Username || rec.Auth != before.Auth || rec.Folder != before.Folder ||
			rec.IsActive != before.IsActive || u.Secrets != nil {
			rec.FailStart, rec.FailAlerted = nil, false
		}
		return putMailbox(tx, rec)
	})
	if err != nil {
		return nil, wrap("update mailbox", err)
	}
	return rec.mailbox(), nil
}

// Apply sets the fields of m that u gives (the non-nil ones), as
// UpdateMailbox does; the IMAP service uses it to try a change before
// storing it.
func (u MailboxUpdate) Apply(m *Mailbox) {
	set(&m.Host, u.Host)
	set(&m.Port, u.Port)
	set(&m.Security, u.Security)
	set(&m.Username, u.Username)
	set(&m.Auth, u.Auth)
	set(&m.Folder, u.Folder)
	set(&m.ArchiveFolder, u.ArchiveFolder)
	set(&m.IsActive, u.IsActive)
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// DeleteMailbox removes mailbox id of organization orgID and its reading
// state. ErrNotFound as FindMailbox.
func (db *DB) DeleteMailbox(orgID, id string) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		rec, err := getOrgMailbox(tx, orgID, id)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketMailboxes).Delete(idKey(rec.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMailboxState).Delete(idKey(rec.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketMailboxesByOrg).Delete(orgTimeIDKey(rec.OrgID, rec.CreatedAt, rec.ID))
	})
	if err != nil {
		return wrap("delete mailbox", err)
	}
	return nil
}

// MailboxState returns where reading mailbox id has got to; the zero
// state for a mailbox never read. ErrNotFound when the mailbox is gone.
func (db *DB) MailboxState(id string) (MailboxState, error) {
	var st MailboxState
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getMailbox(tx, id); err != nil {
			return err
		}
		v := tx.Bucket(bucketMailboxState).Get(idKey(id))
		if len(v) == 8 {
			st.UIDValidity = binary.BigEndian.Uint32(v)
			st.LastUID = binary.BigEndian.Uint32(v[4:])
		}
		return nil
	})
	if err != nil {
		return MailboxState{}, wrap("mailbox state", err)
	}
	return st, nil
}

// MarkMailboxDone records where reading mailbox id has got to and adds
// imported (the mail just done, when it held a report) to its
// messages_imported, in one transaction: each mail is counted once, with
// the mark that says it is done, whatever becomes of the poll. ErrNotFound
// when the mailbox was deleted meanwhile (nothing is written).
func (db *DB) MarkMailboxDone(id string, st MailboxState, imported int) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		rec, err := getMailbox(tx, id)
		if err != nil {
			return err
		}
		if imported > 0 {
			rec.MessagesImported += int64(imported)
			if err := putMailbox(tx, rec); err != nil {
				return err
			}
		}
		v := binary.BigEndian.AppendUint32(nil, st.UIDValidity)
		v = binary.BigEndian.AppendUint32(v, st.LastUID)
		return tx.Bucket(bucketMailboxState).Put(idKey(id), v)
	})
	return wrap("set mailbox state", err)
}

// RecordMailboxPoll updates mailbox id's status after a poll: last_poll_at
// and last_error (cleared by a poll without error). A
// failed poll starts or continues a run of failures; when the run has
// lasted a day, the mailbox_failing alert is raised in the same
// transaction (once per run; a poll that works ends the run), so its
// webhook deliveries are queued with it. ErrNotFound when the mailbox was
// deleted meanwhile.
func (db *DB) RecordMailboxPoll(id string, p MailboxPoll) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		rec, err := getMailbox(tx, id)
		if err != nil {
			return err
		}
		at := p.At.UTC().Truncate(time.Second)
		rec.LastPollAt = &at
		rec.LastError = nil
		if p.Error == "" {
			rec.FailStart, rec.FailAlerted = nil, false
			return putMailbox(tx, rec)
		}
		e := p.Error
		rec.LastError = &e
		if rec.FailStart == nil {
			rec.FailStart = &at
		}
		if err := db.raiseMailboxAlert(tx, rec, at); err != nil {
			return err
		}
		return putMailbox(tx, rec)
	})
	return wrap("record mailbox poll", err)
}

func errMailboxNotFound() error { return errorf(ErrNotFound, "mailbox not found") }

func getMailbox(tx *bolt.Tx, id string) (*mailboxRecord, error) {
	if !ValidID(id) {
		return nil, errMailboxNotFound()
	}
	raw := tx.Bucket(bucketMailboxes).Get(idKey(id))
	if raw == nil {
		return nil, errMailboxNotFound()
	}
	rec := new(mailboxRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode mailbox %s: %w", id, err)
	}
	return rec, nil
}

// getOrgMailbox is getMailbox that also hides other organizations' mailboxes.
func getOrgMailbox(tx *bolt.Tx, orgID, id string) (*mailboxRecord, error) {
	rec, err := getMailbox(tx, id)
	if err != nil {
		return nil, err
	}
	if rec.OrgID != orgID {
		return nil, errMailboxNotFound()
	}
	return rec, nil
}

func putMailbox(tx *bolt.Tx, rec *mailboxRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode mailbox %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketMailboxes).Put(idKey(rec.ID), raw)
}

func (rec *mailboxRecord) mailbox() *Mailbox {
	m := rec.Mailbox
	m.OrgID = rec.OrgID
	m.FailingSince = nil
	if rec.FailStart != nil {
		t := *rec.FailStart
		m.FailingSince = &t
	}
	return &m
}
