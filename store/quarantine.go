package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// QuarantineEntry is an input that yielded nothing usable: a mail or file
// with no report, a report that could not be read or routed to a domain.
// Its raw bytes are kept beside it (see FindQuarantine), never dropped.
// Source is "smtp" or "import"; Name is a file name or "MAIL FROM -> RCPT
// TO"; Size is the size of the input, which may be more than the bytes kept.
type QuarantineEntry struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	Source     string    `json:"source"`
	Name       string    `json:"name"`
	Reason     string    `json:"reason"`
	Size       int64     `json:"size"`
	OrgID      string    `json:"organization_id,omitempty"`
	Retries    int       `json:"retries"`
	// Recipient is the RCPT TO address of a mail, which routes its reports
	// when the entry is retried.
	Recipient string `json:"recipient,omitempty"`
	// Truncated says that only the input's header was kept: the
	// quarantine was at its cap (MaxTotal) when it came.
	Truncated bool `json:"truncated"`
	// Duplicate is set on an entry a commit found already kept for the
	// same input (same bytes, recipient and organization): not stored.
	Duplicate bool `json:"-"`
}

// QuarantineItem is an input to keep in quarantine. A new entry leaves
// Entry.ID empty; Commit sets it. Retrying an entry sets Entry.ID: that
// entry then gets the new reason and one more retry instead of a second
// entry (its bytes stay).
type QuarantineItem struct {
	Entry QuarantineEntry
	Raw   []byte
	// MaxTotal caps the bytes the quarantine keeps in all; 0 means no cap.
	// See putQuarantine.
	MaxTotal int64
}

// quarantineRecord is how an entry is stored.
type quarantineRecord struct {
	ID         string    `json:"id"`
	ReceivedAt time.Time `json:"received_at"`
	Source     string    `json:"source"`
	Name       string    `json:"name"`
	Reason     string    `json:"reason"`
	Size       int64     `json:"size"`
	OrgID      string    `json:"org_id,omitempty"`
	Retries    int       `json:"retries"`
	Recipient  string    `json:"recipient,omitempty"`
	Truncated  bool      `json:"truncated,omitempty"`
	Hash       []byte    `json:"hash,omitempty"`
}

func errQuarantineNotFound() error { return errorf(ErrNotFound, "quarantine entry not found") }

// ListQuarantine returns one page of quarantine entries, newest first, and
// how many there are in all. ErrInvalid for a page or limit below 1.
func (db *DB) ListQuarantine(p Page) ([]*QuarantineEntry, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	entries := []*QuarantineEntry{}
	total := 0
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQuarantine).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if total >= skip && len(entries) < p.Limit {
				rec, err := decodeQuarantine(k, v)
				if err != nil {
					return err
				}
				entries = append(entries, rec.entry())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list quarantine", err)
	}
	return entries, total, nil
}

// FindQuarantine returns entry id and a copy of the raw bytes kept for it.
// ErrNotFound when there is no such entry (or id is malformed).
func (db *DB) FindQuarantine(id string) (*QuarantineEntry, []byte, error) {
	return db.findQuarantine(id, getQuarantine)
}

// quarantineGetter reads an entry as its caller may see it: any entry for
// the admin (getQuarantine), an organization's own for the API
// (getQuarantineOf).
type quarantineGetter func(tx *bolt.Tx, id string) (*quarantineRecord, error)

func (db *DB) findQuarantine(id string, get quarantineGetter) (*QuarantineEntry, []byte, error) {
	var rec *quarantineRecord
	var raw []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if rec, err = get(tx, id); err != nil {
			return err
		}
		raw = bytes.Clone(tx.Bucket(bucketQuarantineRaw).Get(idKey(id)))
		if raw == nil {
			raw = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("find quarantine", err)
	}
	return rec.entry(), raw, nil
}

// DeleteQuarantine removes entry id and its bytes. ErrNotFound when there
// is no such entry.
func (db *DB) DeleteQuarantine(id string) error {
	return db.deleteQuarantineSeen(id, getQuarantine)
}

func (db *DB) deleteQuarantineSeen(id string, get quarantineGetter) error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := get(tx, id); err != nil {
			return err
		}
		return deleteQuarantine(tx, id)
	})
	return wrap("delete quarantine", err)
}

func getQuarantine(tx *bolt.Tx, id string) (*quarantineRecord, error) {
	if !ValidID(id) {
		return nil, errQuarantineNotFound()
	}
	v := tx.Bucket(bucketQuarantine).Get(idKey(id))
	if v == nil {
		return nil, errQuarantineNotFound()
	}
	return decodeQuarantine([]byte(id), v)
}

func decodeQuarantine(k, v []byte) (*quarantineRecord, error) {
	rec := new(quarantineRecord)
	if err := json.Unmarshal(v, rec); err != nil {
		return nil, fmt.Errorf("decode quarantine entry %s: %w", k, err)
	}
	return rec, nil
}

func deleteQuarantine(tx *bolt.Tx, id string) error {
	b := tx.Bucket(bucketQuarantine)
	if v := b.Get(idKey(id)); v != nil {
		if rec, err := decodeQuarantine([]byte(id), v); err == nil && len(rec.Hash) > 0 {
			if err := tx.Bucket(bucketQuarantineByHash).Delete(rec.Hash); err != nil {
				return err
			}
		}
	}
	if err := b.Delete(idKey(id)); err != nil {
		return err
	}
	raw := tx.Bucket(bucketQuarantineRaw).Get(idKey(id))
	if raw != nil {
		total, err := quarantineBytes(tx)
		if err != nil {
			return err
		}
		if err := setQuarantineBytes(tx, total-min(total, int64(len(raw)))); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketQuarantineRaw).Delete(idKey(id))
}

// putQuarantine writes an item of a commit. A new entry (no ID) gets an id,
// written back into item; an existing one (a retry that failed again) keeps
// its bytes and gets the new reason, one more retry, and no second entry.
// An existing entry deleted meanwhile is written anew.
//
// An input already kept (same bytes, recipient and organization) is not
// kept again: item gets that entry, marked Duplicate. With item.MaxTotal
// set, the input is kept whole only while the quarantine stays within
// nine tenths of it; past that only its header block (at most 64 KiB) is
// kept, Truncated and said in the reason; past MaxTotal itself it is
// refused with ErrQuarantineFull.
func putQuarantine(tx *bolt.Tx, item *QuarantineItem, now time.Time) error {
	e := &item.Entry
	if e.ID != "" {
		if old, err := getQuarantine(tx, e.ID); err == nil {
			old.Reason, old.Retries = e.Reason, old.Retries+1
			*e = *old.entry()
			return putQuarantineRecord(tx, old)
		}
	}
	hash := quarantineHash(item)
	if id := tx.Bucket(bucketQuarantineByHash).Get(hash); id != nil {
		if old, err := getQuarantine(tx, string(id)); err == nil {
			*e = *old.entry()
			e.Duplicate = true
			return nil
		}
	}
	raw := item.Raw
	if raw == nil {
		raw = []byte{}
	}
	total, err := quarantineBytes(tx)
	if err != nil {
		return err
	}
	if max := item.MaxTotal; max > 0 && total+int64(len(raw)) > max/10*9 {
		head := headerBlock(raw)
		if total+int64(len(head)) > max {
			return fmt.Errorf("%w: %d of %d bytes in use", ErrQuarantineFull, total, max)
		}
		if len(head) < len(raw) {
			raw = head
			e.Truncated = true
			e.Reason += fmt.Sprintf(" (the quarantine is near its cap of %d bytes: only the header is kept)", max)
		}
	}
	e.ID = NewID()
	if e.ReceivedAt.IsZero() {
		e.ReceivedAt = now
	}
	e.ReceivedAt = e.ReceivedAt.UTC().Truncate(time.Second)
	rec := &quarantineRecord{ID: e.ID, ReceivedAt: e.ReceivedAt, Source: e.Source, Name: e.Name, Reason: e.Reason,
		Size: e.Size, OrgID: e.OrgID, Retries: e.Retries, Recipient: e.Recipient, Truncated: e.Truncated, Hash: hash}
	if err := putQuarantineRecord(tx, rec); err != nil {
		return err
	}
	if err := tx.Bucket(bucketQuarantineByHash).Put(hash, idKey(e.ID)); err != nil {
		return err
	}
	if err := setQuarantineBytes(tx, total+int64(len(raw))); err != nil {
		return err
	}
	return tx.Bucket(bucketQuarantineRaw).Put(idKey(e.ID), raw)
}

// ErrQuarantineFull means the quarantine is at its cap: an input that
// would go there is refused (SMTP 552).
var ErrQuarantineFull = errors.New("the quarantine is full")

// keyQuarantineBytes, in bucketQuarantineByHash, holds the bytes kept in
// all. Hashes are 32 bytes, so it cannot clash.
var keyQuarantineBytes = []byte("total_bytes")

// quarantineBytes returns the bytes the quarantine keeps; a file written
// before the count existed is counted once, here.
func quarantineBytes(tx *bolt.Tx) (int64, error) {
	hb := tx.Bucket(bucketQuarantineByHash) // nil in a file opened read-only before the bucket existed
	if hb != nil {
		if v := hb.Get(keyQuarantineBytes); len(v) == 8 {
			return int64(binary.BigEndian.Uint64(v)), nil
		}
	}
	var total int64
	err := tx.Bucket(bucketQuarantineRaw).ForEach(func(_, v []byte) error {
		total += int64(len(v))
		return nil
	})
	if err != nil {
		return 0, err
	}
	if tx.Writable() && hb != nil {
		return total, setQuarantineBytes(tx, total)
	}
	return total, nil
}

func setQuarantineBytes(tx *bolt.Tx, n int64) error {
	return tx.Bucket(bucketQuarantineByHash).Put(keyQuarantineBytes, binary.BigEndian.AppendUint64(nil, uint64(max(n, 0))))
}

// quarantineHash identifies an input: its bytes, size, recipient and
// organization.
func quarantineHash(item *QuarantineItem) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s\x00", item.Entry.Size, item.Entry.Source, strings.ToLower(item.Entry.Recipient), item.Entry.OrgID)
	h.Write(item.Raw)
	return h.Sum(nil)
}

// maxKeptHeader bounds the header block kept of an input past the cap.
const maxKeptHeader = 64 << 10

// headerBlock returns the header of a mail (up to and including the first
// empty line), at most maxKeptHeader bytes; for input that is no mail,
// its first bytes up to the first empty line, as bounded.
func headerBlock(raw []byte) []byte {
	end := len(raw)
	for _, sep := range [][]byte{[]byte("\r\n\r\n"), []byte("\n\n")} {
		if i := bytes.Index(raw, sep); i >= 0 && i+len(sep) < end {
			end = i + len(sep)
		}
	}
	return raw[:min(end, maxKeptHeader)]
}

// DeleteQuarantineBefore deletes the entries received before t, in
// transactions of at most 500, and returns how many it deleted.
func (db *DB) DeleteQuarantineBefore(t time.Time) (int, error) {
	deleted := 0
	for {
		var ids []string
		err := db.bolt.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketQuarantine).ForEach(func(k, v []byte) error {
				if len(ids) >= 500 {
					return nil
				}
				rec, err := decodeQuarantine(k, v)
				if err != nil {
					return err
				}
				if rec.ReceivedAt.Before(t) {
					ids = append(ids, rec.ID)
				}
				return nil
			})
		})
		if err != nil || len(ids) == 0 {
			return deleted, wrap("delete quarantine", err)
		}
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			for _, id := range ids {
				if err := deleteQuarantine(tx, id); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return deleted, wrap("delete quarantine", err)
		}
		deleted += len(ids)
	}
}

func putQuarantineRecord(tx *bolt.Tx, rec *quarantineRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode quarantine entry %s: %w", rec.ID, err)
	}
	return tx.Bucket(bucketQuarantine).Put(idKey(rec.ID), raw)
}

func (rec *quarantineRecord) entry() *QuarantineEntry {
	return &QuarantineEntry{ID: rec.ID, ReceivedAt: rec.ReceivedAt, Source: rec.Source, Name: rec.Name,
		Reason: rec.Reason, Size: rec.Size, OrgID: rec.OrgID, Retries: rec.Retries, Recipient: rec.Recipient,
		Truncated: rec.Truncated}
}

// The quarantine as an organization sees it (API.md "Quarantine"): the
// entries whose recipient (SMTP) or import belongs to it. An entry of no
// organization is not found by these methods: only the CLI sees it.
// Entries are few (capped, deleted after a retention period), so a list
// reads them all rather than keeping an index per organization.

// ListQuarantineOf returns one page of org's quarantine entries, newest
// first, and how many it has. ErrInvalid for a page or limit below 1.
func (db *DB) ListQuarantineOf(orgID string, p Page) ([]*QuarantineEntry, int, error) {
	skip, err := p.offset()
	if err != nil {
		return nil, 0, err
	}
	entries := []*QuarantineEntry{}
	total := 0
	if !ValidID(orgID) {
		return entries, 0, nil
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQuarantine).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			rec, err := decodeQuarantine(k, v)
			if err != nil {
				return err
			}
			if rec.OrgID != orgID {
				continue
			}
			if total >= skip && len(entries) < p.Limit {
				entries = append(entries, rec.entry())
			}
			total++
		}
		return nil
	})
	if err != nil {
		return nil, 0, wrap("list quarantine", err)
	}
	return entries, total, nil
}

// FindQuarantineOf returns org's entry id and a copy of its bytes.
// ErrNotFound when there is no such entry or it is not org's.
func (db *DB) FindQuarantineOf(orgID, id string) (*QuarantineEntry, []byte, error) {
	return db.findQuarantine(id, func(tx *bolt.Tx, id string) (*quarantineRecord, error) {
		return getQuarantineOf(tx, orgID, id)
	})
}

// DeleteQuarantineOf removes org's entry id and its bytes. ErrNotFound
// when there is no such entry or it is not org's.
func (db *DB) DeleteQuarantineOf(orgID, id string) error {
	return db.deleteQuarantineSeen(id, func(tx *bolt.Tx, id string) (*quarantineRecord, error) {
		return getQuarantineOf(tx, orgID, id)
	})
}

func getQuarantineOf(tx *bolt.Tx, orgID, id string) (*quarantineRecord, error) {
	rec, err := getQuarantine(tx, id)
	if err != nil {
		return nil, err
	}
	if orgID == "" || rec.OrgID != orgID {
		return nil, errQuarantineNotFound()
	}
	return rec, nil
}
