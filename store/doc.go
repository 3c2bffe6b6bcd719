// Package store keeps every dmarcd entity in one bbolt file: organizations,
// API keys, domains, aggregate reports with their records, summaries and
// daily roll-ups, failure reports, alerts, webhooks and their outbox, and
// the quarantine, each in files of its own. A kind with several files
// shares their prefix: aggregate_* (aggregate reports: drafts and the
// ingest commit, codec, roll-ups, retention), failure_* (failure reports),
// alert_* (alert rows, the dedup entries and source index the rules read,
// and running the rules of package alert inside the ingest commit), and
// outbox* (webhook deliveries waiting). The rules themselves (thresholds,
// what raises which alert) are package alert's.
//
// Conventions:
//   - Bucket names and key encodings live in schema.go and nowhere else;
//     integers in keys are big-endian so that range scans sort.
//   - Every exported DB method opens exactly one transaction and works
//     through unexported helper functions whose first parameter is the
//     *bolt.Tx (getOrg, putDomain, ...). Helpers never open transactions.
//   - Bytes read from bbolt die with their transaction: values are decoded
//     (which copies) or copied before they leave it.
//   - Stored values are unexported record structs, never the exported API
//     types, so the API's JSON tags can change without moving data: JSON
//     for the small entities, a compact binary encoding (aggregate_codec.go)
//     for reports, records and roll-ups, which are written and read by the
//     hundred thousand.
//   - Reads that derive cached data note a version first (DomainsVersion,
//     the auth cache's generation); writes bump it before and after their
//     transaction.
//   - Failures a client may see are *Error values whose Kind is one of
//     ErrNotFound, ErrConflict, ErrInvalid, ErrLimit or ErrLocked; anything
//     else is an internal error prefixed "store: ".
package store
