package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dmarcd/dmarcd/store/internal/days"
	"github.com/dmarcd/dmarcd/store/internal/reports"
)

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
