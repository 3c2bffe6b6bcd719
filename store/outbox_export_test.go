package store

import bolt "go.etcd.io/bbolt"

// QueueTestAlert creates a through insertAlert (and so queues its webhook
// deliveries) in a transaction of its own, for the external tests of the
// outbox.
func (db *DB) QueueTestAlert(a *Alert) error {
	return db.bolt.Update(func(tx *bolt.Tx) error { return insertAlert(tx, a) })
}
