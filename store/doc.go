// Package store keeps every dmarcd entity in one bbolt file: organizations,
// API keys and domains here, later reports and alerts in files of their own.
//
// Conventions:
//   - Bucket names and key encodings live in schema.go and nowhere else;
//     integers in keys are big-endian so that range scans sort.
//   - Every exported DB method opens exactly one transaction and works
//     through unexported helper functions whose first parameter is the
//     *bolt.Tx (getOrg, putDomain, ...). Helpers never open transactions.
//   - Bytes read from bbolt die with their transaction: values are decoded
//     (which copies) or copied before they leave it.
//   - Stored values are JSON of unexported record structs, so the API's
//     JSON tags on the exported types can change without moving data.
//   - Failures a client may see are *Error values whose Kind is one of
//     ErrNotFound, ErrConflict, ErrInvalid, ErrLimit or ErrLocked; anything
//     else is an internal error prefixed "store: ".
package store
