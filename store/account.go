package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Accounts: the people who sign in to the web interface (issue 26,
// docs/people.md). A person is an email address, unique regardless of
// case, with an optional password hash and TOTP second factor; what they
// may do lives in their memberships (membership.go). The store keeps the
// password's hash as the application layer encoded it (argon2id) and the
// hashes of the recovery codes; it never sees a password.

// Account is a person.
type Account struct {
	ID    string `json:"id"`
	Email string `json:"email"`
	// PasswordHash is the encoded argon2id hash; "" for an account that
	// has set no password yet (invited) or signs in through OIDC only.
	PasswordHash string `json:"password_hash,omitempty"`
	// TOTPSecret is the base32 TOTP secret while TOTPEnabled, or the one
	// being enrolled (TOTPPending) before it is confirmed.
	TOTPSecret  string `json:"totp_secret,omitempty"`
	TOTPPending string `json:"totp_pending,omitempty"`
	TOTPEnabled bool   `json:"totp_enabled,omitempty"`
	// TOTPLastStep is the time step of the last code accepted: a code of
	// that step or earlier is refused (no reuse).
	TOTPLastStep int64 `json:"totp_last_step,omitempty"`
	// RecoveryHashes are the SHA-256 hashes (hex) of the unused recovery
	// codes.
	RecoveryHashes []string   `json:"recovery_hashes,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	LastSignInAt   *time.Time `json:"last_sign_in_at,omitempty"`
}

// MaxEmailLen bounds an email address (RFC 5321's path limit).
const MaxEmailLen = 254

// CleanEmail trims and lowercases an email address and checks it is one
// bare address (local@domain, no display name); ErrInvalid otherwise.
func CleanEmail(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" || len(s) > MaxEmailLen {
		return "", errorf(ErrInvalid, "email must be an address of 1 to %d characters", MaxEmailLen)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" || !strings.Contains(s[strings.LastIndexByte(s, '@')+1:], ".") && !strings.HasSuffix(s, "@localhost") {
		return "", errorf(ErrInvalid, "email %q is not an address like name@example.com", s)
	}
	return s, nil
}

func errAccountNotFound() error { return errorf(ErrNotFound, "account not found") }

// CreateAccount creates the account of email (CleanEmail's rules,
// ErrInvalid) and returns it; ErrConflict when the address has one.
func (db *DB) CreateAccount(email string) (*Account, error) {
	email, err := CleanEmail(email)
	if err != nil {
		return nil, err
	}
	acc := &Account{ID: NewID(), Email: email, CreatedAt: db.now()}
	err = db.bolt.Update(func(tx *bolt.Tx) error { return createAccount(tx, acc) })
	if err != nil {
		return nil, wrap("create account", err)
	}
	return acc, nil
}

func createAccount(tx *bolt.Tx, acc *Account) error {
	byEmail := tx.Bucket(bucketAccountsByEmail)
	if byEmail.Get([]byte(acc.Email)) != nil {
		return errorf(ErrConflict, "an account with email %s exists", acc.Email)
	}
	if err := putAccount(tx, acc); err != nil {
		return err
	}
	return byEmail.Put([]byte(acc.Email), idKey(acc.ID))
}

// FindAccount returns account id, or ErrNotFound.
func (db *DB) FindAccount(id string) (*Account, error) {
	var acc *Account
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		acc, err = getAccount(tx, id)
		return err
	})
	if err != nil {
		return nil, wrap("find account", err)
	}
	return acc, nil
}

// FindAccountByEmail returns the account of email (any case), or
// ErrNotFound (also for a malformed address).
func (db *DB) FindAccountByEmail(email string) (*Account, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var acc *Account
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAccountsByEmail).Get([]byte(email))
		if id == nil {
			return errAccountNotFound()
		}
		var err error
		acc, err = getAccount(tx, string(id))
		return err
	})
	if err != nil {
		return nil, wrap("find account", err)
	}
	return acc, nil
}

// UpdateAccount changes account id with fn in one transaction and returns
// it. fn may change any field but ID, Email and CreatedAt. When
// endSessions is true, every web session of the account ends in the same
// transaction (a password reset). ErrNotFound for an unknown id; fn's
// error is returned as it is.
func (db *DB) UpdateAccount(id string, endSessions bool, fn func(*Account) error) (*Account, error) {
	var acc *Account
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		a, err := getAccount(tx, id)
		if err != nil {
			return err
		}
		keep := *a
		if err := fn(a); err != nil {
			return err
		}
		a.ID, a.Email, a.CreatedAt = keep.ID, keep.Email, keep.CreatedAt
		if endSessions {
			if err := deleteAccountSessions(tx, id); err != nil {
				return err
			}
		}
		acc = a
		return putAccount(tx, a)
	})
	if err != nil {
		return nil, wrap("update account", err)
	}
	return acc, nil
}

// EndAccountSessions ends every web session of account id and returns
// how many it ended.
func (db *DB) EndAccountSessions(id string) error {
	return wrap("end sessions", db.bolt.Update(func(tx *bolt.Tx) error { return deleteAccountSessions(tx, id) }))
}

// ListAccounts returns every account, by email.
func (db *DB) ListAccounts() ([]*Account, error) {
	out := []*Account{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAccountsByEmail).ForEach(func(_, id []byte) error {
			a, err := getAccount(tx, string(id))
			if err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	})
	return out, wrap("list accounts", err)
}

func getAccount(tx *bolt.Tx, id string) (*Account, error) {
	if !ValidID(id) {
		return nil, errAccountNotFound()
	}
	raw := tx.Bucket(bucketAccounts).Get(idKey(id))
	if raw == nil {
		return nil, errAccountNotFound()
	}
	a := new(Account)
	if err := json.Unmarshal(raw, a); err != nil {
		return nil, fmt.Errorf("decode account %s: %w", id, err)
	}
	return a, nil
}

func putAccount(tx *bolt.Tx, a *Account) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode account %s: %w", a.ID, err)
	}
	return tx.Bucket(bucketAccounts).Put(idKey(a.ID), raw)
}

// sessionByAccountKey is account id | token hash.
func sessionByAccountKey(accountID string, hash []byte) []byte {
	return append([]byte(accountID), hash...)
}

// deleteAccountSessions ends every session of account id.
func deleteAccountSessions(tx *bolt.Tx, accountID string) error {
	prefix := []byte(accountID)
	byAcc := tx.Bucket(bucketSessionsByAccount)
	var doomed [][]byte
	c := byAcc.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	sessions := tx.Bucket(bucketSessions)
	for _, k := range doomed {
		if err := sessions.Delete(k[len(prefix):]); err != nil {
			return err
		}
		if err := byAcc.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
