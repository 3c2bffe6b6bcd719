package store

import (
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

// storeFailures writes the failure drafts of a commit, each unless its
// domain is gone (or moved to another organization) or the same report
// (reporter, source IP, message id, arrival date) is stored for the domain
// already, and updates the day roll-ups once per day touched. It sets each
// draft's Outcome and returns the drafts stored, in order. owners caches
// domain id -> organization id ("" when gone) across the commit.
func storeFailures(tx *bolt.Tx, drafts []*FailureDraft, owners map[string]string) ([]*FailureDraft, error) {
	if len(drafts) == 0 {
		return nil, nil
	}
	var stored []*FailureDraft
	rolls := failDays{}
	for _, f := range drafts {
		f.out = FailureOutcome{}
		owner, err := domainOwner(tx, owners, f.rep.DomainID)
		if err != nil {
			return nil, err
		}
		if owner == "" || owner != f.rep.OrgID {
			f.out.DomainGone = true
			continue
		}
		dedup := failDedupKey(&f.rep)
		if id := tx.Bucket(bucketFailureDedup).Get(dedup); id != nil && tx.Bucket(bucketFailures).Get(id) != nil {
			f.out.DuplicateID = string(id)
			continue
		}
		if err := putFailure(tx, f, dedup); err != nil {
			return nil, err
		}
		day, err := rolls.get(tx, failRollupKey(f.rep.OrgID, days.Of(f.rep.ArrivalDate), f.rep.DomainID))
		if err != nil {
			return nil, err
		}
		day.Add(&f.rep, f.mask, 1)
		f.out.Stored = true
		stored = append(stored, f)
	}
	return stored, rolls.put(tx)
}

// domainOwner returns the organization of a domain, "" when it is gone.
func domainOwner(tx *bolt.Tx, owners map[string]string, domainID string) (string, error) {
	if owner, ok := owners[domainID]; ok {
		return owner, nil
	}
	dom, err := getDomain(tx, domainID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	owner := ""
	if err == nil {
		owner = dom.OrgID
	}
	owners[domainID] = owner
	return owner, nil
}

// putFailure writes a report, its headers and its index entries.
func putFailure(tx *bolt.Tx, f *FailureDraft, dedup []byte) error {
	r := &f.rep
	idx := failIndexValue(r, f.mask)
	puts := []struct {
		bucket []byte
		k, v   []byte
	}{
		{bucketFailures, idKey(r.ID), f.val},
		{bucketFailuresByOrg, failTimeKey(r.OrgID, r.ArrivalDate, r.ID), idx},
		{bucketFailuresByDomain, failTimeKey(r.DomainID, r.ArrivalDate, r.ID), idx},
		{bucketFailureDedup, dedup, []byte(r.ID)},
	}
	if f.hdrVal != nil {
		puts = append(puts, struct {
			bucket []byte
			k, v   []byte
		}{bucketFailureHeaders, idKey(r.ID), f.hdrVal})
	}
	for _, p := range puts {
		if err := tx.Bucket(p.bucket).Put(p.k, p.v); err != nil {
			return fmt.Errorf("failure report %s: %w", r.ID, err)
		}
	}
	return nil
}

// deleteFailure removes a stored report with its headers and index
// entries, and takes it out of its day roll-up (in days, written by the
// caller). A report already gone is no error.
func deleteFailure(tx *bolt.Tx, id string, rolls failDays) error {
	raw := tx.Bucket(bucketFailures).Get(idKey(id))
	if raw == nil {
		return nil
	}
	det, mask, err := reports.DecodeFailure(id, raw)
	if err != nil {
		return err
	}
	r := det.FailureReport
	dedup := failDedupKey(r)
	if cur := tx.Bucket(bucketFailureDedup).Get(dedup); cur != nil && string(cur) == id {
		if err := tx.Bucket(bucketFailureDedup).Delete(dedup); err != nil {
			return err
		}
	}
	for _, del := range []struct {
		bucket, k []byte
	}{
		{bucketFailures, idKey(id)},
		{bucketFailureHeaders, idKey(id)},
		{bucketFailuresByOrg, failTimeKey(r.OrgID, r.ArrivalDate, id)},
		{bucketFailuresByDomain, failTimeKey(r.DomainID, r.ArrivalDate, id)},
	} {
		if err := tx.Bucket(del.bucket).Delete(del.k); err != nil {
			return err
		}
	}
	day, err := rolls.get(tx, failRollupKey(r.OrgID, days.Of(r.ArrivalDate), r.DomainID))
	if err != nil {
		return err
	}
	day.Add(r, mask, -1)
	return nil
}

// failDays holds the roll-ups a transaction changes, by key, so that each
// is decoded and written once.
type failDays map[string]*reports.FailureDay

// get returns the roll-up under key, loading it (or starting it) once.
func (d failDays) get(tx *bolt.Tx, key []byte) (*reports.FailureDay, error) {
	if day := d[string(key)]; day != nil {
		return day, nil
	}
	day := reports.NewFailureDay()
	if raw := tx.Bucket(bucketFailureRollups).Get(key); raw != nil {
		var err error
		if day, err = reports.DecodeFailureDay(raw); err != nil {
			return nil, fmt.Errorf("failure roll-up %x: %w", key, err)
		}
	}
	d[string(key)] = day
	return day, nil
}

// put writes every roll-up back, deleting those left empty.
func (d failDays) put(tx *bolt.Tx) error {
	b := tx.Bucket(bucketFailureRollups)
	for key, day := range d {
		if day.Total() <= 0 {
			if err := b.Delete([]byte(key)); err != nil {
				return err
			}
			continue
		}
		day.Prune(MaxDaySources)
		if err := b.Put([]byte(key), reports.AppendFailureDay(nil, day)); err != nil {
			return err
		}
	}
	return nil
}

// failureRefs is what the alert rules need of the failure reports stored.
func failureRefs(stored []*FailureDraft) []FailureRef {
	if len(stored) == 0 {
		return nil
	}
	refs := make([]FailureRef, len(stored))
	for i, f := range stored {
		refs[i] = FailureRef{ID: f.rep.ID, OrgID: f.rep.OrgID, DomainID: f.rep.DomainID,
			SourceIP: reports.SourceIPOf(&f.rep), Geo: f.rep.Geo, ArrivalDate: f.rep.ArrivalDate}
	}
	return refs
}
