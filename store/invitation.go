package store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Invitations and password resets: one-time links. The token is 32
// random bytes (base64url) shown once; the database keeps its SHA-256
// hash only. A token is good until it expires or is used, whichever
// comes first.

// The kinds of one-time link.
const (
	// InviteKind invites a person into an organization: using it sets the
	// password when the account has none.
	InviteKind = "invite"
	// ResetKind sets a new password.
	ResetKind = "reset"
)

// Invitation is a one-time link, without its token.
type Invitation struct {
	Kind      string     `json:"kind"`
	AccountID string     `json:"account_id"`
	OrgID     string     `json:"org_id"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt time.Time  `json:"expires_at"`
	UsedAt    *time.Time `json:"used_at,omitempty"`
}

func errInvitationNotFound() error {
	return errorf(ErrNotFound, "this link is unknown, used or expired: ask for a new one")
}

// invitationTokenLen is the length of a token: 32 bytes, base64url.
var invitationTokenLen = base64.RawURLEncoding.EncodedLen(32)

// CreateInvitation makes a one-time link of kind for account accountID
// in organization orgID, good until now+ttl, and returns its token.
// ErrNotFound for an unknown organization or account.
func (db *DB) CreateInvitation(kind, orgID, accountID string, now time.Time, ttl time.Duration) (string, *Invitation, error) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	token := base64.RawURLEncoding.EncodeToString(raw[:])
	hash := sha256.Sum256([]byte(token))
	now = now.UTC().Truncate(time.Second)
	inv := &Invitation{Kind: kind, AccountID: accountID, OrgID: orgID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		if _, err := getAccount(tx, accountID); err != nil {
			return err
		}
		if err := putInvitation(tx, hash[:], inv); err != nil {
			return err
		}
		return tx.Bucket(bucketInvitationsByOrg).Put(invOrgKey(orgID, accountID, hash[:]), nil)
	})
	if err != nil {
		return "", nil, wrap("create invitation", err)
	}
	return token, inv, nil
}

// invOrgKey is org id | account id | token hash.
func invOrgKey(orgID, accountID string, hash []byte) []byte {
	return append(pairKey(orgID, accountID), hash...)
}

func putInvitation(tx *bolt.Tx, hash []byte, inv *Invitation) error {
	raw, err := json.Marshal(inv)
	if err != nil {
		return fmt.Errorf("encode invitation: %w", err)
	}
	return tx.Bucket(bucketInvitations).Put(hash, raw)
}

func getInvitation(tx *bolt.Tx, token string, now time.Time) ([]byte, *Invitation, error) {
	if len(token) != invitationTokenLen {
		return nil, nil, errInvitationNotFound()
	}
	hash := sha256.Sum256([]byte(token))
	raw := tx.Bucket(bucketInvitations).Get(hash[:])
	if raw == nil {
		return nil, nil, errInvitationNotFound()
	}
	inv := new(Invitation)
	if err := json.Unmarshal(raw, inv); err != nil {
		return nil, nil, fmt.Errorf("decode invitation: %w", err)
	}
	if inv.UsedAt != nil || !now.Before(inv.ExpiresAt) {
		return nil, nil, errInvitationNotFound()
	}
	return hash[:], inv, nil
}

// FindInvitation returns the live invitation of token at now with its
// account and organization; ErrNotFound (one message) for a token
// unknown, used or expired.
func (db *DB) FindInvitation(token string, now time.Time) (*Invitation, *Account, *Organization, error) {
	var (
		inv *Invitation
		acc *Account
		org *orgRecord
	)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		if _, inv, err = getInvitation(tx, token, now); err != nil {
			return err
		}
		if acc, err = getAccount(tx, inv.AccountID); err != nil {
			return notFoundAs(err, errInvitationNotFound())
		}
		org, err = getOrg(tx, inv.OrgID)
		return notFoundAs(err, errInvitationNotFound())
	})
	if err != nil {
		return nil, nil, nil, wrap("find invitation", err)
	}
	return inv, acc, org.organization(), nil
}

// UseInvitation uses the live invitation of token at now, once: in one
// transaction it marks it used, lets fn change its account (set the
// password), accepts the membership it was made for, and ends the
// account's sessions when endSessions is true. ErrNotFound for a token unknown, used or expired, or
// whose member was removed meanwhile; fn's error is returned as it is
// and uses nothing.
func (db *DB) UseInvitation(token string, now time.Time, endSessions bool, fn func(*Invitation, *Account) error) (*Invitation, *Account, *Organization, error) {
	now = now.UTC().Truncate(time.Second)
	var (
		inv *Invitation
		acc *Account
		org *orgRecord
	)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		hash, i, err := getInvitation(tx, token, now)
		if err != nil {
			return err
		}
		inv = i
		if acc, err = getAccount(tx, inv.AccountID); err != nil {
			return notFoundAs(err, errInvitationNotFound())
		}
		if org, err = getOrg(tx, inv.OrgID); err != nil {
			return notFoundAs(err, errInvitationNotFound())
		}
		if _, err := membershipOf(tx, inv.OrgID, inv.AccountID); err != nil {
			return notFoundAs(err, errInvitationNotFound())
		}
		if err := fn(inv, acc); err != nil {
			return err
		}
		inv.UsedAt = &now
		if err := putInvitation(tx, hash, inv); err != nil {
			return err
		}
		if err := acceptMembership(tx, inv.OrgID, inv.AccountID, now); err != nil {
			return err
		}
		if endSessions {
			if err := deleteAccountSessions(tx, acc.ID); err != nil {
				return err
			}
		}
		return putAccount(tx, acc)
	})
	if err != nil {
		return nil, nil, nil, wrap("use invitation", err)
	}
	return inv, acc, org.organization(), nil
}

// UseAccountInvitations accepts every membership of account accountID
// and marks its live invitations used at now (the person proved their
// email another way: single sign-on), and returns how many invitations.
func (db *DB) UseAccountInvitations(accountID string, now time.Time) (int, error) {
	now = now.UTC().Truncate(time.Second)
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		c := tx.Bucket(bucketMembershipsByAccount).Cursor()
		prefix := []byte(accountID)
		var orgs []string
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			orgs = append(orgs, string(k[len(prefix):]))
		}
		for _, orgID := range orgs {
			if err := acceptMembership(tx, orgID, accountID, now); err != nil {
				return err
			}
			p := pairKey(orgID, accountID)
			ic := tx.Bucket(bucketInvitationsByOrg).Cursor()
			for k, _ := ic.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = ic.Next() {
				hash := k[len(p):]
				raw := tx.Bucket(bucketInvitations).Get(hash)
				if raw == nil {
					continue
				}
				inv := new(Invitation)
				if err := json.Unmarshal(raw, inv); err != nil {
					return err
				}
				if inv.Kind != InviteKind || inv.UsedAt != nil || !now.Before(inv.ExpiresAt) {
					continue
				}
				inv.UsedAt = &now
				if err := putInvitation(tx, bytes.Clone(hash), inv); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, wrap("use invitations", err)
}

// deleteInvitationsOf deletes the one-time links of accountID in orgID.
func deleteInvitationsOf(tx *bolt.Tx, orgID, accountID string) error {
	return deleteInvitationsPrefix(tx, pairKey(orgID, accountID))
}

func deleteInvitationsPrefix(tx *bolt.Tx, prefix []byte) error {
	byOrg := tx.Bucket(bucketInvitationsByOrg)
	var hashes [][]byte
	c := byOrg.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		hashes = append(hashes, bytes.Clone(k[len(k)-sha256.Size:]))
	}
	for _, h := range hashes {
		if err := tx.Bucket(bucketInvitations).Delete(h); err != nil {
			return err
		}
	}
	return deleteAllWithPrefix(byOrg, prefix)
}

// SweepInvitations deletes the invitations used or expired before
// before, and returns how many.
func (db *DB) SweepInvitations(before time.Time) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		byOrg := tx.Bucket(bucketInvitationsByOrg)
		var doomed [][]byte
		err := byOrg.ForEach(func(k, _ []byte) error {
			raw := tx.Bucket(bucketInvitations).Get(k[len(k)-sha256.Size:])
			inv := new(Invitation)
			if raw == nil || json.Unmarshal(raw, inv) != nil ||
				inv.ExpiresAt.Before(before) || inv.UsedAt != nil && inv.UsedAt.Before(before) {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := tx.Bucket(bucketInvitations).Delete(k[len(k)-sha256.Size:]); err != nil {
				return err
			}
			if err := byOrg.Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, wrap("sweep invitations", err)
}
