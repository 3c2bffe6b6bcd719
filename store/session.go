package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Web interface sessions (UI.md, "Sessions and security"). A session is
// opened by signing in with an API key; the browser holds a random 256-bit
// token, the database only its SHA-256 hash, with the key it was opened
// with. Revoking that key ends the session in the same transaction
// (RevokeAPIKey).

// Session lifetimes.
const (
	// SessionIdleTimeout ends a session nobody used for that long.
	SessionIdleTimeout = 12 * time.Hour
	// SessionMaxAge ends every session that long after sign-in.
	SessionMaxAge = 7 * 24 * time.Hour
	// sessionTouchEvery bounds how often a lookup writes the last-seen
	// time: a write per page view would cost an fsync each.
	sessionTouchEvery = time.Minute
)

// Session is a signed-in browser. The token itself is not kept. A
// session belongs to an API key (KeyID, key sign-in) or to a person
// (AccountID, with the role of their membership in the session's current
// organization OrgID, read with the session).
type Session struct {
	KeyID     string
	AccountID string
	OrgID     string
	// Account and Role are the person and their role in OrgID, for a
	// person's session (FindSession); nil and "" for a key's.
	Account *Account
	Role    string
	// CSRFToken is the value every state-changing form of the session
	// must carry (field csrf_token); random, bound to this session.
	CSRFToken  string
	CreatedAt  time.Time
	LastSeenAt time.Time
}

// sessionRecord is how a session is stored.
type sessionRecord struct {
	KeyID      string    `json:"key_id"`
	AccountID  string    `json:"account_id,omitempty"`
	OrgID      string    `json:"org_id"`
	CSRF       string    `json:"csrf"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// expired reports whether the session has ended at now.
func (rec *sessionRecord) expired(now time.Time) bool {
	return !now.Before(rec.LastSeenAt.Add(SessionIdleTimeout)) || !now.Before(rec.CreatedAt.Add(SessionMaxAge))
}

func (rec *sessionRecord) session() *Session {
	return &Session{KeyID: rec.KeyID, AccountID: rec.AccountID, OrgID: rec.OrgID, CSRFToken: rec.CSRF,
		CreatedAt: rec.CreatedAt, LastSeenAt: rec.LastSeenAt}
}

// sessionTokenLen is the length of a token: 32 random bytes, base64url.
var sessionTokenLen = base64.RawURLEncoding.EncodedLen(32)

func errSessionNotFound() error { return errorf(ErrNotFound, "no such session") }

// sessionHash is the stored form of a token.
func sessionHash(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// sessionByKeyKey is key id | token hash.
func sessionByKeyKey(keyID string, hash []byte) []byte {
	return append([]byte(keyID), hash...)
}

// CreateSession opens a session for the active key keyID at now and returns
// its token (shown to the browser only) and the session. Expired sessions
// of the same key are deleted on the way. ErrNotFound when the key is
// unknown or revoked.
func (db *DB) CreateSession(keyID string, now time.Time) (token string, s *Session, err error) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	token = base64.RawURLEncoding.EncodeToString(raw[:])
	var csrf [32]byte
	_, _ = rand.Read(csrf[:])
	now = now.UTC().Truncate(time.Second)
	hash := sessionHash(token)
	var rec *sessionRecord
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		key, err := getKey(tx, keyID)
		if err != nil {
			return err
		}
		if key.RevokedAt != nil {
			return errKeyNotFound()
		}
		if err := deleteKeySessionsIf(tx, keyID, func(r *sessionRecord) bool { return r.expired(now) }); err != nil {
			return err
		}
		rec = &sessionRecord{KeyID: keyID, OrgID: key.OrgID, CSRF: hex.EncodeToString(csrf[:]),
			CreatedAt: now, LastSeenAt: now}
		if err := putSession(tx, hash[:], rec); err != nil {
			return err
		}
		return tx.Bucket(bucketSessionsByKey).Put(sessionByKeyKey(keyID, hash[:]), nil)
	})
	if err != nil {
		return "", nil, wrap("create session", err)
	}
	return token, rec.session(), nil
}

// CreatePersonSession opens a session for account accountID in
// organization orgID, of which it must be an accepted member, at now, stamps the
// account's last sign-in, and returns the token and the session (with
// the account and role). ErrNotFound for an unknown account or no
// membership.
func (db *DB) CreatePersonSession(accountID, orgID string, now time.Time) (string, *Session, error) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	var csrf [32]byte
	_, _ = rand.Read(csrf[:])
	now = now.UTC().Truncate(time.Second)
	hash := sessionHash(token)
	var s *Session
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		acc, err := getAccount(tx, accountID)
		if err != nil {
			return err
		}
		m, err := acceptedMembershipOf(tx, orgID, accountID)
		if err != nil {
			return err
		}
		rec := &sessionRecord{AccountID: accountID, OrgID: orgID, CSRF: hex.EncodeToString(csrf[:]),
			CreatedAt: now, LastSeenAt: now}
		if err := putSession(tx, hash[:], rec); err != nil {
			return err
		}
		if err := tx.Bucket(bucketSessionsByAccount).Put(sessionByAccountKey(accountID, hash[:]), nil); err != nil {
			return err
		}
		acc.LastSignInAt = &now
		if err := putAccount(tx, acc); err != nil {
			return err
		}
		s = rec.session()
		s.Account, s.Role = acc, m.Role
		return nil
	})
	if err != nil {
		return "", nil, wrap("create session", err)
	}
	return token, s, nil
}

// SetSessionOrg makes orgID the current organization of the person's
// session of token. ErrNotFound for a token unknown or expired, a key's
// session, or an organization the person is no member of.
func (db *DB) SetSessionOrg(token, orgID string, now time.Time) error {
	if len(token) != sessionTokenLen {
		return errSessionNotFound()
	}
	hash := sessionHash(token)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		rec, err := getSession(tx, hash[:])
		if err != nil {
			return err
		}
		if rec.expired(now) || rec.AccountID == "" {
			return errSessionNotFound()
		}
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		if _, err := acceptedMembershipOf(tx, orgID, rec.AccountID); err != nil {
			return errOrgNotFound()
		}
		rec.OrgID = orgID
		return putSession(tx, hash[:], rec)
	})
	return wrap("switch organization", err)
}

// FindSession returns the live session of token at now, with its key and
// organization; a person's session has no key (nil) and carries its
// account and role. An unknown, malformed or expired token, or one whose key
// was revoked, is ErrNotFound (one message for all); an expired session is
// deleted. A lookup more than a minute after the last one records the time,
// which keeps the session from idling out.
func (db *DB) FindSession(token string, now time.Time) (*Session, *APIKey, *Organization, error) {
	if len(token) != sessionTokenLen {
		return nil, nil, nil, errSessionNotFound()
	}
	now = now.UTC().Truncate(time.Second)
	hash := sessionHash(token)
	var (
		rec   *sessionRecord
		key   *keyRecord
		org   *orgRecord
		acc   *Account
		m     *Membership
		stale bool
	)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if rec, err = getSession(tx, hash[:]); err != nil {
			return err
		}
		if rec.expired(now) {
			stale = true
			return errSessionNotFound()
		}
		if rec.AccountID != "" {
			if acc, err = getAccount(tx, rec.AccountID); err != nil {
				return notFoundAs(err, errSessionNotFound())
			}
			if m, err = acceptedMembershipOf(tx, rec.OrgID, rec.AccountID); err != nil {
				stale = true
				return errSessionNotFound()
			}
			org, err = getOrg(tx, rec.OrgID)
			return notFoundAs(err, errSessionNotFound())
		}
		if key, err = getKey(tx, rec.KeyID); err != nil {
			return notFoundAs(err, errSessionNotFound())
		}
		if key.RevokedAt != nil {
			stale = true
			return errSessionNotFound()
		}
		org, err = getOrg(tx, key.OrgID)
		return notFoundAs(err, errSessionNotFound())
	})
	if stale {
		_ = db.DeleteSession(token)
	}
	if err != nil {
		return nil, nil, nil, wrap("find session", err)
	}
	if now.Sub(rec.LastSeenAt) >= sessionTouchEvery {
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			r, err := getSession(tx, hash[:])
			if err != nil {
				return err
			}
			if now.After(r.LastSeenAt) {
				r.LastSeenAt = now
			}
			rec = r
			return putSession(tx, hash[:], r)
		})
		if err != nil {
			return nil, nil, nil, wrap("touch session", err)
		}
	}
	s := rec.session()
	if acc != nil {
		s.Account, s.Role = acc, m.Role
		return s, nil, org.organization(), nil
	}
	return s, key.apiKey(), org.organization(), nil
}

// DeleteSession ends the session of token (sign-out). An unknown token is
// not an error.
func (db *DB) DeleteSession(token string) error {
	if len(token) != sessionTokenLen {
		return nil
	}
	hash := sessionHash(token)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		rec, err := getSession(tx, hash[:])
		if isKind(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := unindexSession(tx, rec, hash[:]); err != nil {
			return err
		}
		return tx.Bucket(bucketSessions).Delete(hash[:])
	})
	return wrap("delete session", err)
}

// unindexSession deletes the index entry of a session (by key or by
// account).
func unindexSession(tx *bolt.Tx, rec *sessionRecord, hash []byte) error {
	if rec.AccountID != "" {
		return tx.Bucket(bucketSessionsByAccount).Delete(sessionByAccountKey(rec.AccountID, hash))
	}
	if rec.KeyID != "" {
		return tx.Bucket(bucketSessionsByKey).Delete(sessionByKeyKey(rec.KeyID, hash))
	}
	return nil
}

// deleteKeySessions ends every session of key keyID.
func deleteKeySessions(tx *bolt.Tx, keyID string) error {
	return deleteKeySessionsIf(tx, keyID, func(*sessionRecord) bool { return true })
}

// deleteKeySessionsIf deletes the sessions of keyID for which drop is true.
func deleteKeySessionsIf(tx *bolt.Tx, keyID string, drop func(*sessionRecord) bool) error {
	prefix := []byte(keyID)
	byKey := tx.Bucket(bucketSessionsByKey)
	var doomed [][]byte
	c := byKey.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		hash := k[len(prefix):]
		rec, err := getSession(tx, hash)
		if err != nil && !isKind(err, ErrNotFound) {
			return err
		}
		if rec == nil || drop(rec) {
			doomed = append(doomed, bytes.Clone(k))
		}
	}
	sessions := tx.Bucket(bucketSessions)
	for _, k := range doomed {
		if err := sessions.Delete(k[len(prefix):]); err != nil {
			return err
		}
		if err := byKey.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func getSession(tx *bolt.Tx, hash []byte) (*sessionRecord, error) {
	raw := tx.Bucket(bucketSessions).Get(hash)
	if raw == nil {
		return nil, errSessionNotFound()
	}
	rec := new(sessionRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("decode session: %w", err)
	}
	return rec, nil
}

func putSession(tx *bolt.Tx, hash []byte, rec *sessionRecord) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	return tx.Bucket(bucketSessions).Put(hash, raw)
}

// sweepBatch bounds the sessions one sweep transaction deletes, so that a
// sweep never holds the write lock for long.
const sweepBatch = 1000

// SweepSessions deletes every session that has expired at now (idle or
// past its absolute lifetime), with its index entry, and returns how many
// it deleted. Sessions are otherwise deleted only when they are used after
// expiry, at sign-out or with their key; the scheduler calls this
// periodically so that abandoned sessions do not stay in the file.
func (db *DB) SweepSessions(now time.Time) (int, error) {
	total := 0
	for {
		var doomed []*sessionRecord
		var hashes [][]byte
		err := db.bolt.View(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketSessions).Cursor()
			for k, v := c.First(); k != nil && len(hashes) < sweepBatch; k, v = c.Next() {
				rec, err := decodeSessionRecord(v)
				if err != nil || rec.expired(now) {
					if rec == nil {
						rec = &sessionRecord{}
					}
					doomed, hashes = append(doomed, rec), append(hashes, bytes.Clone(k))
				}
			}
			return nil
		})
		if err != nil || len(hashes) == 0 {
			return total, wrap("sweep sessions", err)
		}
		err = db.bolt.Update(func(tx *bolt.Tx) error {
			sessions := tx.Bucket(bucketSessions)
			for i, h := range hashes {
				// Read again: the session may have been used (and so
				// renewed) between the two transactions.
				raw := sessions.Get(h)
				if raw == nil {
					continue
				}
				if rec, err := decodeSessionRecord(raw); err == nil && !rec.expired(now) {
					continue
				}
				if err := unindexSession(tx, doomed[i], h); err != nil {
					return err
				}
				if err := sessions.Delete(h); err != nil {
					return err
				}
				total++
			}
			return nil
		})
		if err != nil {
			return total, wrap("sweep sessions", err)
		}
		if len(hashes) < sweepBatch {
			return total, nil
		}
	}
}

// decodeSessionRecord reads a stored session.
func decodeSessionRecord(raw []byte) (*sessionRecord, error) {
	rec := new(sessionRecord)
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, err
	}
	return rec, nil
}
