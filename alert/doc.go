// Package alert holds the alert rules: which alerts dmarcd raises, with
// which severity, title, message and details, and when one would repeat an
// alert already raised. The rules are pure: they decide from plain data
// (a report's counts and sources, a failure report, two DNS records) and
// from a read-only History the caller gives them. They import neither
// bbolt nor the network. Package store runs the report and failure report
// rules inside the ingest commit that stores the reports (so an alert
// exists exactly when its report does) and keeps what they remember (the
// alert rows, the dedup entries, the index of sources seen); package
// worker runs the DNS rule after each DNS check.
//
// One file per rule family: report.go (aggregate reports), failure.go
// (failure reports), dns.go (DNS record changes), tls.go (TLS reports),
// mailbox.go (IMAP mailboxes); thresholds in rules.go.
// A new family (TLS failure rate, new senders, ...) gets a file of its own
// and its types below.
//
// The alert types, their severities and thresholds (Rules, DefaultRules;
// serve's --alert-* flags set them):
//
//   - dmarc_failure_rate, per stored aggregate report: warning when at
//     least MinFailing (10) messages fail DMARC and they are at least
//     FailureRateWarning (10 %) of the report's messages, critical at
//     FailureRateCritical (50 %); MinFailing applies to both, so that one
//     failing message of one is no alarm. At most one per domain per UTC
//     day and severity: a warning does not hold back a critical alert
//     later that day (the situation got worse), a critical one holds back
//     a later warning.
//   - new_failing_source (info): a source IP with mail failing DMARC in a
//     report, not seen in any report of the domain from NewSourceDays (30)
//     days before the report's first day up to that day. The first report
//     of a domain is its baseline and raises none (every source would be
//     "new"); at most MaxNewSourceAlerts (10) per domain per UTC day, so a
//     spoofing wave of thousands of IPs is a few alerts, not thousands.
//   - forensic_report_received (info): a failure (forensic) report
//     arrived; at most one per domain per UTC clock hour of the time it is
//     raised.
//   - dns_record_missing (critical): the domain's _dmarc record vanished.
//   - reporting_address_removed (critical): dmarcd's reporting address
//     left the record's rua (reports stop arriving; the domain goes
//     inactive).
//   - policy_weakened (warning): p or pct of the record was lowered.
//   - dns_record_changed: the record is no longer valid, or several are
//     published (warning); any other change, a record published again
//     included (info).
//   - tls_failure_rate, per stored SMTP TLS report (tls.go): warning when
//     at least TLSMinFailed (10) sessions failed and they are at least
//     TLSFailureRateWarning (5 %) of the report's sessions, critical at
//     TLSFailureRateCritical (25 %); deduplicated like dmarc_failure_rate.
//   - mailbox_failing (warning), after each recorded poll of an IMAP
//     mailbox (mailbox.go): every poll has failed for MailboxFailingAfter
//     (a day). Raised once per run of failures; a poll that works ends the
//     run, and a mailbox failing for another day raises it again. The
//     caller (package store, in the transaction that records the poll)
//     keeps the run's start and whether it was alerted. It names no domain.
//   - new_sender (info, sender.go, run hourly by worker.SenderWatch): a
//     known service or base domain with at least NewSenderShare (1 %) of
//     today's and yesterday's mail, absent from the NewSourceDays (30)
//     days before and not announced then; none in a domain's first
//     BaselineDays (7) days.
//   - policy_ready (info, sender.go): the advice stage became
//     ready_for_quarantine or ready_for_reject; not on a domain's first
//     evaluation, a stage at most once per PolicyReadyRepeatDays (7).
//
// Aggregate reports whose date range ended more than MaxReportAge (7 days)
// before they are stored (an archive being imported) raise no alert.
// "Per UTC day" and "per hour" are the day and hour the alert is raised.
package alert
