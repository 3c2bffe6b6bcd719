package imap

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

// credentialsContext binds sealed credentials to their use.
const credentialsContext = "dmarcd mailbox credentials v1"

// SealCredentials encrypts c for store.CreateMailbox and UpdateMailbox.
func SealCredentials(box *secret.Box, c Credentials) ([]byte, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return box.Seal(raw, credentialsContext), nil
}

// OpenCredentials decrypts credentials sealed by SealCredentials. Without
// the right key the error says so (secret.ErrWrongKey, secret.ErrDamaged).
func OpenCredentials(box *secret.Box, sealed []byte) (Credentials, error) {
	var c Credentials
	if box == nil {
		return c, fmt.Errorf("cannot read the mailbox credentials: no secret key loaded (%s)", secret.FileName)
	}
	raw, err := box.Open(sealed, credentialsContext)
	if err != nil {
		return c, fmt.Errorf("cannot read the mailbox credentials: %w", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("cannot read the mailbox credentials: %w", err)
	}
	return c, nil
}

// AccountOf returns the Account of a stored mailbox with its credentials
// decrypted.
func AccountOf(m *store.Mailbox, box *secret.Box, sealed []byte) (Account, error) {
	creds, err := OpenCredentials(box, sealed)
	return Account{
		Host: m.Host, Port: m.Port, Security: m.Security, Username: m.Username,
		Credentials: creds, Folder: m.Folder, ArchiveFolder: m.ArchiveFolder,
	}, err
}

// StoreDirectory is the Directory and State of the database: mailboxes
// from store.DB, credentials opened with Box (nil or wrong: each mailbox
// reports that as its last_error). Metrics, when set, counts each
// recorded poll (dmarcd_imap_polls_total).
type StoreDirectory struct {
	DB      *store.DB
	Box     *secret.Box
	Metrics *Metrics
}

var (
	_ Directory = StoreDirectory{}
	_ State     = StoreDirectory{}
)

// Mailboxes lists the active mailboxes.
func (d StoreDirectory) Mailboxes(context.Context) ([]Entry, error) {
	boxes, sealed, err := d.DB.ActiveMailboxes()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(boxes))
	for i, m := range boxes {
		acct, err := AccountOf(m, d.Box, sealed[i])
		out[i] = Entry{Mailbox: Mailbox{ID: m.ID, OrgID: m.OrgID}, Version: m.UpdatedAt, Account: acct, Err: err}
	}
	return out, nil
}

// RecordPoll writes a poll's outcome into the mailbox's status.
func (d StoreDirectory) RecordPoll(id string, at time.Time, res PollResult, err error) error {
	d.Metrics.poll(err)
	p := store.MailboxPoll{At: at} // its mails were counted as each was done (Save)
	if err != nil {
		p.Error = err.Error()
	}
	return d.DB.RecordMailboxPoll(id, p)
}

// Load reads where reading mailbox id has got to.
func (d StoreDirectory) Load(id string) (uint32, uint32, error) {
	st, err := d.DB.MailboxState(id)
	return st.UIDValidity, st.LastUID, err
}

// Save records where reading mailbox id has got to, and counts the mail
// done in messages_imported, in one transaction.
func (d StoreDirectory) Save(id string, uidValidity, lastUID uint32, imported int) error {
	return d.DB.MarkMailboxDone(id, store.MailboxState{UIDValidity: uidValidity, LastUID: lastUID}, imported)
}
