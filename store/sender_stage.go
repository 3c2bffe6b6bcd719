package store

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// SenderStages returns the advice stage the sender-watch job
// (worker.SenderWatch) last stored for each of domainIDs, in one read
// transaction: the overview shows these instead of computing an advice per
// domain. A domain never evaluated, or whose entry is damaged, is absent.
func (db *DB) SenderStages(domainIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(domainIDs))
	err := db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAlertSenders)
		for _, id := range domainIDs {
			raw := b.Get(idKey(id))
			if raw == nil {
				continue
			}
			// Only the stage: the rest of the state is the rules' memory.
			var st struct {
				Stage string `json:"stage"`
			}
			if json.Unmarshal(raw, &st) == nil && st.Stage != "" {
				out[id] = st.Stage
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("read sender stages", err)
	}
	return out, nil
}
