package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Memberships: a person's place in an organization, with one role there
// (owner, admin or viewer; the application layer gives them meaning, the
// store only keeps an organization from losing its last owner). Removing
// a membership or changing its role ends the person's web sessions in
// the same transaction, so that no session keeps rights it lost.

// OwnerRole is the role an organization must keep at least one member
// of.
const OwnerRole = "owner"

// Membership is one person in one organization.
type Membership struct {
	ID        string    `json:"id"`
	OrgID     string    `json:"org_id"`
	AccountID string    `json:"account_id"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
	// AcceptedAt is when the person took their place: they used the
	// membership's invitation link, or signed in with single sign-on (a
	// verified email). Until then the membership is pending: it is listed
	// but gives no access (no session opens in its organization), so that
	// whoever holds a link cannot reach the person's other organizations.
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
}

// Accepted reports whether the membership gives access.
func (m *Membership) Accepted() bool { return m.AcceptedAt != nil }

func errMemberNotFound() error { return errorf(ErrNotFound, "member not found") }

func errLastOwner() error {
	return errorf(ErrConflict, "an organization keeps at least one owner: make another member owner first")
}

// pairKey is a | b (two ids).
func pairKey(a, b string) []byte { return append([]byte(a), b...) }

// AddMembership makes account accountID a member of organization orgID
// with role. ErrNotFound for an unknown organization or account,
// ErrConflict when the account is a member already.
func (db *DB) AddMembership(orgID, accountID, role string) (*Membership, error) {
	m := &Membership{ID: NewID(), OrgID: orgID, AccountID: accountID, Role: role, CreatedAt: db.now()}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		acc, err := getAccount(tx, accountID)
		if err != nil {
			return err
		}
		if tx.Bucket(bucketMembershipsByOrg).Get(pairKey(orgID, accountID)) != nil {
			return errorf(ErrConflict, "%s is a member already", acc.Email)
		}
		return putMembership(tx, m)
	})
	if err != nil {
		return nil, wrap("add member", err)
	}
	return m, nil
}

func putMembership(tx *bolt.Tx, m *Membership) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode membership: %w", err)
	}
	if err := tx.Bucket(bucketMemberships).Put(idKey(m.ID), raw); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMembershipsByOrg).Put(pairKey(m.OrgID, m.AccountID), idKey(m.ID)); err != nil {
		return err
	}
	return tx.Bucket(bucketMembershipsByAccount).Put(pairKey(m.AccountID, m.OrgID), idKey(m.ID))
}

func getMembership(tx *bolt.Tx, id string) (*Membership, error) {
	if !ValidID(id) {
		return nil, errMemberNotFound()
	}
	raw := tx.Bucket(bucketMemberships).Get(idKey(id))
	if raw == nil {
		return nil, errMemberNotFound()
	}
	m := new(Membership)
	if err := json.Unmarshal(raw, m); err != nil {
		return nil, fmt.Errorf("decode membership %s: %w", id, err)
	}
	return m, nil
}

// getOrgMembership reads membership id of orgID: another organization's
// is ErrNotFound.
func getOrgMembership(tx *bolt.Tx, orgID, id string) (*Membership, error) {
	m, err := getMembership(tx, id)
	if err != nil {
		return nil, err
	}
	if m.OrgID != orgID {
		return nil, errMemberNotFound()
	}
	return m, nil
}

// acceptedMembershipOf reads the accepted membership of accountID in
// orgID; a pending one is ErrNotFound.
func acceptedMembershipOf(tx *bolt.Tx, orgID, accountID string) (*Membership, error) {
	m, err := membershipOf(tx, orgID, accountID)
	if err != nil {
		return nil, err
	}
	if !m.Accepted() {
		return nil, errMemberNotFound()
	}
	return m, nil
}

// acceptMembership marks the membership of accountID in orgID accepted at
// now (no change when it is).
func acceptMembership(tx *bolt.Tx, orgID, accountID string, now time.Time) error {
	m, err := membershipOf(tx, orgID, accountID)
	if err != nil || m.Accepted() {
		return err
	}
	m.AcceptedAt = &now
	return putMembership(tx, m)
}

// membershipOf reads the membership of accountID in orgID.
func membershipOf(tx *bolt.Tx, orgID, accountID string) (*Membership, error) {
	id := tx.Bucket(bucketMembershipsByOrg).Get(pairKey(orgID, accountID))
	if id == nil {
		return nil, errMemberNotFound()
	}
	return getMembership(tx, string(id))
}

// Member is a membership with its person.
type Member struct {
	Membership
	Account *Account
}

// FindMember returns member id of organization orgID with its account;
// ErrNotFound also for another organization's member.
func (db *DB) FindMember(orgID, id string) (*Member, error) {
	var out *Member
	err := db.bolt.View(func(tx *bolt.Tx) error {
		m, err := getOrgMembership(tx, orgID, id)
		if err != nil {
			return err
		}
		acc, err := getAccount(tx, m.AccountID)
		if err != nil {
			return err
		}
		out = &Member{Membership: *m, Account: acc}
		return nil
	})
	if err != nil {
		return nil, wrap("find member", err)
	}
	return out, nil
}

// FindMembership returns the membership of accountID in orgID, or
// ErrNotFound.
func (db *DB) FindMembership(orgID, accountID string) (*Membership, error) {
	var out *Membership
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		out, err = membershipOf(tx, orgID, accountID)
		return err
	})
	if err != nil {
		return nil, wrap("find membership", err)
	}
	return out, nil
}

// ListMembers returns the members of organization orgID with their
// accounts, by email.
func (db *DB) ListMembers(orgID string) ([]*Member, error) {
	out := []*Member{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := getOrg(tx, orgID); err != nil {
			return err
		}
		prefix := orgPrefix(orgID)
		c := tx.Bucket(bucketMembershipsByOrg).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			m, err := getMembership(tx, string(v))
			if err != nil {
				return err
			}
			acc, err := getAccount(tx, m.AccountID)
			if err != nil {
				return err
			}
			out = append(out, &Member{Membership: *m, Account: acc})
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list members", err)
	}
	sortMembers(out)
	return out, nil
}

func sortMembers(ms []*Member) {
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && ms[j].Account.Email < ms[j-1].Account.Email; j-- {
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
}

// AccountMemberships returns the accepted memberships of account
// accountID (the ones that give access) with their organizations, by
// organization name.
func (db *DB) AccountMemberships(accountID string) ([]*Membership, []*Organization, error) {
	var ms []*Membership
	var orgs []*Organization
	err := db.bolt.View(func(tx *bolt.Tx) error {
		prefix := []byte(accountID)
		c := tx.Bucket(bucketMembershipsByAccount).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			m, err := getMembership(tx, string(v))
			if err != nil {
				return err
			}
			if !m.Accepted() {
				continue
			}
			org, err := getOrg(tx, m.OrgID)
			if err != nil {
				continue // being deleted
			}
			ms, orgs = append(ms, m), append(orgs, org.organization())
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("list memberships", err)
	}
	// By name, case-insensitive.
	for i := 1; i < len(orgs); i++ {
		for j := i; j > 0 && string(orgNameKey(orgs[j].Name)) < string(orgNameKey(orgs[j-1].Name)); j-- {
			orgs[j], orgs[j-1] = orgs[j-1], orgs[j]
			ms[j], ms[j-1] = ms[j-1], ms[j]
		}
	}
	return ms, orgs, nil
}

// countOwners counts the owners of orgID.
func countOwners(tx *bolt.Tx, orgID string) (int, error) {
	n := 0
	prefix := orgPrefix(orgID)
	c := tx.Bucket(bucketMembershipsByOrg).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		m, err := getMembership(tx, string(v))
		if err != nil {
			return 0, err
		}
		if m.Role == OwnerRole {
			n++
		}
	}
	return n, nil
}

// SetMemberRole gives member id of orgID role and ends the person's web
// sessions. ErrNotFound for another organization's member; ErrConflict
// when that would leave the organization without an owner. Setting the
// role a member has changes nothing and ends no session.
func (db *DB) SetMemberRole(orgID, id, role string) (*Membership, error) {
	var out *Membership
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		m, err := getOrgMembership(tx, orgID, id)
		if err != nil {
			return err
		}
		out = m
		if m.Role == role {
			return nil
		}
		if m.Role == OwnerRole {
			n, err := countOwners(tx, orgID)
			if err != nil {
				return err
			}
			if n <= 1 {
				return errLastOwner()
			}
		}
		m.Role = role
		if err := putMembership(tx, m); err != nil {
			return err
		}
		return deleteAccountSessions(tx, m.AccountID)
	})
	if err != nil {
		return nil, wrap("set role", err)
	}
	return out, nil
}

// RemoveMember removes member id from orgID, ends the person's web
// sessions and takes their address out of the organization's
// notification list (their mail stops); the account stays (it may belong elsewhere). ErrNotFound for
// another organization's member, ErrConflict for the last owner.
func (db *DB) RemoveMember(orgID, id string) (*Member, error) {
	var out *Member
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		m, err := getOrgMembership(tx, orgID, id)
		if err != nil {
			return err
		}
		if m.Role == OwnerRole {
			n, err := countOwners(tx, orgID)
			if err != nil {
				return err
			}
			if n <= 1 {
				return errLastOwner()
			}
		}
		acc, err := getAccount(tx, m.AccountID)
		if err != nil {
			return err
		}
		out = &Member{Membership: *m, Account: acc}
		if err := tx.Bucket(bucketMemberships).Delete(idKey(m.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMembershipsByOrg).Delete(pairKey(m.OrgID, m.AccountID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMembershipsByAccount).Delete(pairKey(m.AccountID, m.OrgID)); err != nil {
			return err
		}
		if err := deleteInvitationsOf(tx, m.OrgID, m.AccountID); err != nil {
			return err
		}
		// Their mail stops: their own entry of the notification list goes
		// (an address of theirs an admin listed too: it was theirs).
		if err := deleteNotificationRecipient(tx, m.OrgID, acc.Email, db.now()); err != nil {
			return err
		}
		return deleteAccountSessions(tx, m.AccountID)
	})
	if err != nil {
		return nil, wrap("remove member", err)
	}
	return out, nil
}

// deleteOrgMemberships deletes the memberships of orgID (organization
// deletion) and ends their people's sessions.
func deleteOrgMemberships(tx *bolt.Tx, orgID string) error {
	prefix := orgPrefix(orgID)
	var ms []*Membership
	c := tx.Bucket(bucketMembershipsByOrg).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		m, err := getMembership(tx, string(v))
		if err != nil {
			continue
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		if err := tx.Bucket(bucketMemberships).Delete(idKey(m.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMembershipsByAccount).Delete(pairKey(m.AccountID, m.OrgID)); err != nil {
			return err
		}
		if err := deleteAccountSessions(tx, m.AccountID); err != nil {
			return err
		}
	}
	return deleteAllWithPrefix(tx.Bucket(bucketMembershipsByOrg), prefix)
}
