// Package reports holds the values of the three kinds of reports the store
// keeps (aggregate reports with their records, failure reports, SMTP TLS
// reports) and the pure work done on them: their binary encodings (on
// package codec's primitives), and the sums kept at ingest so that
// statistics never read a report (a report's Summary, a domain's day
// roll-ups, the per-source roll-ups and their segments, the failure and
// TLS day roll-ups). It reads and writes no file: package store decides
// which bucket holds what (store/schema.go) and runs the transactions.
//
// The exported types are the store's API under their store names
// (store.Record is reports.Record): the store declares them as aliases.
// Accumulators (SummaryAcc, DayRollup, Sources, FailureDay...) are used by
// one goroutine at a time.
package reports
