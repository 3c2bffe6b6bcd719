// Package store keeps every dmarcd entity in one bbolt file: organizations,
// API keys, web sessions, domains, aggregate reports with their records,
// summaries and daily roll-ups, failure reports, TLS reports, alerts,
// webhooks and their outbox, mailboxes, reverse DNS and the quarantine.
//
// Files are rooms: the public methods of an entity are in the file named
// for it (organization.go, apikey.go, session.go, domain.go, report.go,
// failure.go, tls.go, source.go, statistics.go, alert.go, webhook.go,
// outbox.go, mailbox.go, quarantine.go, rdns.go); the file itself is in
// store.go (Open, Check, Backup) and compact.go. A kind with several files
// shares their prefix, the entity's file holding its API and the others
// its helpers (alert_rules.go runs the rules of package alert inside the
// commits that store reports, alert_sources.go keeps the source index
// they read). The ingest commit, for every kind of report, is ingest.go;
// an aggregate report being parsed is a ReportDraft (report_draft.go).
// The rules themselves (thresholds, what raises which alert) are package
// alert's.
//
// Pure pieces are sub-packages, each tested on its own: internal/reports
// (the values of the three kinds of reports, their binary encodings and
// the sums kept at ingest, which the store names by alias: store.Record is
// reports.Record), internal/codec (the binary primitives those encodings
// are made of), internal/bloom (the Bloom filter of the dedup identities
// and of the alert rules' source sets) and internal/days (UTC day numbers
// and the scan of a range of days' keys).
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
//     for the small entities, a compact binary encoding (internal/reports)
//     for reports, records and roll-ups, which are written and read by the
//     hundred thousand.
//   - Reads that derive cached data note a version first (DomainsVersion,
//     the auth cache's generation); writes bump it before and after their
//     transaction.
//   - What the DB learns while it runs (caches, versions, the buffer sizes
//     drafts start at) is a field of the DB, not of the package: two DBs
//     of one process share nothing but the id sequence of NewID.
//   - Failures a client may see are *Error values whose Kind is one of
//     ErrNotFound, ErrConflict, ErrInvalid, ErrLimit or ErrLocked (a date
//     range refused is ErrRangeReversed or ErrRangeTooLong, of kind
//     ErrInvalid); their messages name no parameter of a front end.
//     Anything else is an internal error prefixed "store: ".
package store
