package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/codec"
)

// Buckets. Every name the file uses is declared here; Open creates any that
// are missing, so a new bucket needs only a line in allBuckets (a change to
// stored data needs a migration, see migrate.go). Binary values of reports
// and roll-ups are written by package reports (store/internal/reports) on
// package codec's primitives; the small entities are JSON.
var (
	// bucketMeta: keySchemaVersion -> uint64 (big-endian).
	bucketMeta = []byte("meta")

	// bucketOrgs: org id -> orgRecord JSON.
	bucketOrgs = []byte("orgs")
	// bucketOrgsByName: lower(name) -> org id.
	bucketOrgsByName = []byte("orgs_by_name")

	// bucketKeys: key id -> keyRecord JSON.
	bucketKeys = []byte("api_keys")
	// bucketKeysByHash: sha256(secret) (32 bytes) -> key id.
	bucketKeysByHash = []byte("api_keys_by_hash")
	// bucketKeysByOrg: orgTimeIDKey(org id, created_at, key id) -> empty.
	bucketKeysByOrg = []byte("api_keys_by_org")

	// bucketDomains: domain id -> domainRecord JSON.
	bucketDomains = []byte("domains")
	// bucketDomainsByOrg: orgTimeIDKey(org id, created_at, domain id) -> empty.
	bucketDomainsByOrg = []byte("domains_by_org")
	// bucketDomainsByName: domainNameKey(org id, name) -> domain id.
	bucketDomainsByName = []byte("domains_by_name")
	// bucketDomainsByEmail: emailKey(reporting email) -> domain id.
	bucketDomainsByEmail = []byte("domains_by_email")

	// bucketReports: report id -> the report and its summary (binary,
	// reports.AppendReport). A report is visible once it is here.
	bucketReports = []byte("reports")
	// bucketReportsByDomain: reportKey(domain id, date_begin, identity) ->
	// binary report id | date_end (big-endian Unix seconds; before schema
	// 10 the id as text): the date index of the listings, one clustered
	// insert per report (indexValue in report.go).
	bucketReportsByDomain = []byte("reports_by_domain")
	// bucketReportsByIdentity was the dedup index of schema 5 and before,
	// deleted by the migration to 6: the date index keys carry the identity
	// (identity_filter.go).
	bucketReportsByIdentity = []byte("reports_by_identity")
	// bucketRecords: recordKey(report id, block seq) -> a block of records
	// (binary, reports.AppendRecord). Report ids are time-ordered, so inserts
	// append.
	bucketRecords = []byte("report_records")
	// bucketReportsPending: binary report id -> domain id, for a report whose
	// records are being written in several transactions and that is not yet
	// visible; leftovers after a crash are deleted (DiscardPendingReports).
	bucketReportsPending = []byte("reports_pending")
	// bucketRollups: rollupKey(domain id, UTC day) -> reports.DayRollup
	// (binary): plain as ingest writes it (version 1,
	// reports.AppendDayRollup) or, once the seal job closed the day,
	// sealed (version 2, reports.AppendSealedDayRollup: the same head,
	// then the groups and sources compressed; rollup_seal.go).
	bucketRollups = []byte("report_rollups")
	// bucketDayTotals: rollupKey(domain id, UTC day) -> the totals at the
	// head of that roll-up, for the overview (day_totals.go).
	bucketDayTotals = []byte("report_day_totals")
	// bucketRecordBlocks: blockKey(domain id, UTC day of date_begin, seq)
	// -> a sealed block of records of that domain and day (record_block.go):
	// the read-optimized form records of bucketRecords move to once their
	// day is closed (record_seal.go).
	bucketRecordBlocks = []byte("record_blocks")
	// bucketReportTables: blockKey(domain id, UTC day of date_begin, seq)
	// -> the report table of the record block of that key: the values
	// (reports.AppendReport) of the reports whose first records it holds,
	// compressed together (block.EncodeTable); each of those reports'
	// values in bucketReports is then a pointer to it (report_table.go).
	// Record retention drops blocks, never tables.
	bucketReportTables = []byte("report_tables")

	// bucketQuarantine: entry id -> quarantineRecord JSON.
	bucketQuarantine = []byte("quarantine")
	// bucketQuarantineRaw: entry id -> the raw bytes kept.
	bucketQuarantineRaw = []byte("quarantine_raw")
	// bucketQuarantineByHash: sha256 of an input (with its recipient and
	// organization) -> entry id: an input is quarantined once. Its key
	// keyQuarantineBytes holds the bytes kept in all (uint64, big-endian).
	bucketQuarantineByHash = []byte("quarantine_by_hash")

	// bucketWebhooks: webhook id -> webhookRecord JSON (with its secret).
	bucketWebhooks = []byte("webhooks")
	// bucketWebhooksByOrg: orgTimeIDKey(org id, created_at, webhook id) -> empty.
	bucketWebhooksByOrg = []byte("webhooks_by_org")
	// bucketOutbox: outboxKey(due, entry id) -> outboxRecord (binary): the
	// deliveries waiting for their next attempt, in due order (outbox.go).
	bucketOutbox = []byte("webhook_outbox")
	// bucketOutboxByWebhook: webhook id | entry id -> outboxKey | alert id.
	bucketOutboxByWebhook = []byte("webhook_outbox_by_webhook")
	// bucketOutboxAlerts: alert id | webhook id -> the state of the alert's
	// delivery to that webhook (one byte), while any of it is pending.
	bucketOutboxAlerts = []byte("webhook_outbox_alerts")

	// bucketAlerts: alert id -> alertRecord JSON.
	bucketAlerts = []byte("alerts")
	// bucketAlertsByOrg: orgTimeIDKey(org id, created_at, alert id) ->
	// alertIndexValue (status, severity, domain id: what the list filters on).
	bucketAlertsByOrg = []byte("alerts_by_org")
	// bucketAlertsByDomain: alertDomainKey(domain id, alert id) -> empty.
	bucketAlertsByDomain = []byte("alerts_by_domain")
	// bucketAlertDedup: dedupKey(UTC day, domain id, type, cause) -> what
	// was raised for that cause that day (alert_rules.go).
	bucketAlertDedup = []byte("alert_dedup")
	// bucketAlertSources: sourceSetKey(domain id, UTC day) -> the sorted
	// 32-bit hashes of the source IPs seen that day (alert_sources.go).
	bucketAlertSources = []byte("alert_sources")
	// bucketAlertSenders: domain id -> alert.SenderState JSON (RecordSenderCheck).
	bucketAlertSenders = []byte("alert_senders")

	// Failure (forensic) reports; keys in failure_keys.go.
	// bucketFailures: report id -> the report (binary, reports.AppendFailure).
	bucketFailures = []byte("failure_reports")
	// bucketFailureHeaders: report id -> its original headers, when any.
	bucketFailureHeaders = []byte("failure_headers")
	// bucketFailuresByOrg: failTimeKey(org id, arrival, id) -> failIndexValue.
	bucketFailuresByOrg = []byte("failure_reports_by_org")
	// bucketFailuresByDomain: failTimeKey(domain id, arrival, id) -> failIndexValue.
	bucketFailuresByDomain = []byte("failure_reports_by_domain")
	// bucketFailureDedup: failDedupKey (domain id | identity hash) -> report id.
	bucketFailureDedup = []byte("failure_dedup")
	// bucketFailureRollups: failRollupKey(org id, UTC day, domain id) ->
	// reports.FailureDay (binary, reports.AppendFailureDay).
	bucketFailureRollups = []byte("failure_rollups")

	// SMTP TLS reports (RFC 8460); keys in tls.go.
	// bucketTLSReports: report id -> the report with its policies (reports.AppendTLS).
	bucketTLSReports = []byte("tls_reports")
	// bucketTLSByOrg: tlsTimeKey(org id, date_begin, id) -> domain id | date_end.
	bucketTLSByOrg = []byte("tls_reports_by_org")
	// bucketTLSByDomain: tlsTimeKey(domain id, date_begin, id) -> date_end.
	bucketTLSByDomain = []byte("tls_reports_by_domain")
	// bucketTLSDedup: tlsDedupKey(domain id, org name, report id) -> id.
	bucketTLSDedup = []byte("tls_dedup")
	// bucketTLSRollups: tlsRollupKey(domain id, UTC day) -> reports.TLSDay (JSON).
	bucketTLSRollups = []byte("tls_rollups")
	// Sources (source.go, rdns.go).
	// bucketSourceRollups: rollupKey(domain id, UTC day) | seq (big-endian)
	// -> a segment of that day's per-source-IP roll-up: plain as ingest
	// writes it (version 3, reports.AppendSourceSegment), or the one
	// segment 0 of a day the seal job closed (version 4, columns
	// compressed, reports.AppendSealedSourceSegment; rollup_seal.go),
	// followed by plain ones of late reports until the next seal.
	bucketSourceRollups = []byte("source_rollups")
	// bucketRDNSPending: rollupKey(domain id, UTC day) -> the sequence of
	// the last commit that touched it: days whose IPs reverse DNS must see.
	bucketRDNSPending = []byte("rdns_pending")
	// bucketRDNS: source IP (text) -> rdnsEntry (binary, rdns.go).
	bucketRDNS = []byte("rdns")
	// Export to other systems (export_cursor.go).
	// bucketExportCursors: sink name (e.g. "clickhouse") -> ExportCursor
	// JSON: how far a sink has exported the stored reports (export_cursor.go).
	bucketExportCursors = []byte("export_cursors")
	// IMAP intake (mailbox.go).
	// bucketMailboxes: mailbox id -> mailboxRecord JSON (sealed credentials included).
	bucketMailboxes = []byte("mailboxes")
	// bucketMailboxesByOrg: orgTimeIDKey(org id, created_at, mailbox id) -> empty.
	bucketMailboxesByOrg = []byte("mailboxes_by_org")
	// bucketMailboxState: mailbox id -> UIDVALIDITY | last done UID (big-endian uint32s).
	bucketMailboxState = []byte("mailbox_state")
	// Web interface sessions (session.go).
	// bucketSessions: sha256(session token) -> sessionRecord JSON.
	bucketSessions = []byte("web_sessions")
	// bucketSessionsByKey: API key id | sha256(token) -> empty, so that
	// revoking a key ends its sessions.
	bucketSessionsByKey = []byte("web_sessions_by_key")
	// The organization listing of aggregate reports (report_org_index.go).
	// bucketReportsByOrg was its index in schema 3 to 9, dropped by the
	// migration to 10: the listing merges the domains' date indexes.
	bucketReportsByOrg = []byte("reports_by_org")
	// bucketReportCounts: org id -> how many aggregate reports it has
	// (uint64, big-endian): the listing's total without a date filter.
	bucketReportCounts = []byte("report_counts")

	// People (issue 26: account.go, membership.go, invitation.go, audit.go).
	// bucketAccounts: account id -> Account JSON.
	bucketAccounts = []byte("accounts")
	// bucketAccountsByEmail: lower(email) -> account id.
	bucketAccountsByEmail = []byte("accounts_by_email")
	// bucketMemberships: membership id -> Membership JSON.
	bucketMemberships = []byte("memberships")
	// bucketMembershipsByOrg: org id | account id -> membership id.
	bucketMembershipsByOrg = []byte("memberships_by_org")
	// bucketMembershipsByAccount: account id | org id -> membership id.
	bucketMembershipsByAccount = []byte("memberships_by_account")
	// bucketInvitations: sha256(token) -> Invitation JSON.
	bucketInvitations = []byte("invitations")
	// bucketInvitationsByOrg: org id | account id | sha256(token) -> empty.
	bucketInvitationsByOrg = []byte("invitations_by_org")
	// bucketSessionsByAccount: account id | sha256(token) -> empty, so that
	// removing a member, changing a role or a password ends the sessions.
	bucketSessionsByAccount = []byte("web_sessions_by_account")
	// bucketAudit: orgTimeIDKey(org id, at, entry id) -> AuditEntry JSON.
	bucketAudit = []byte("audit_log")
	// Notifications (issue 27).
	// bucketNotifySettings: org id -> NotificationSettings JSON
	// (notification.go).
	bucketNotifySettings = []byte("notification_settings")
	// bucketMailOutbox: mailKey(due, mail id) -> mailRecord JSON: the mail
	// waiting for its next attempt, in due order (mail_outbox.go).
	bucketMailOutbox = []byte("mail_outbox")
	// bucketMailLog: mail id -> MailStatus JSON: what became of each mail,
	// kept MailLogKeep after it was sent or given up.
	bucketMailLog = []byte("mail_log")
	// bucketAlertMail: "cursor" -> 'c' | the id of the last alert the
	// alert mail job read, none on an empty file (alert_mail.go).
	bucketAlertMail = []byte("alert_mail")
	// bucketAlertMailWindows: alertWindowKey(org id, domain id, recipient)
	// -> alertWindow JSON: the alerts pending for one mail.
	bucketAlertMailWindows = []byte("alert_mail_windows")
	// bucketDigestSent: digestSentKey(org id, recipient, period) ->
	// queued at (big-endian Unix seconds) | mail id: the digests queued,
	// so that each goes out once per period and recipient
	// (digest_mail.go).
	bucketDigestSent = []byte("digest_sent")
)

// allBuckets lists every top-level bucket Open makes sure exists.
var allBuckets = [][]byte{
	bucketMeta,
	bucketOrgs, bucketOrgsByName,
	bucketKeys, bucketKeysByHash, bucketKeysByOrg,
	bucketDomains, bucketDomainsByOrg, bucketDomainsByName, bucketDomainsByEmail,
	bucketReports, bucketReportsByDomain, bucketRecords,
	bucketReportsPending, bucketRollups,
	bucketQuarantine, bucketQuarantineRaw, bucketQuarantineByHash,
	bucketWebhooks, bucketWebhooksByOrg, bucketOutbox, bucketOutboxByWebhook, bucketOutboxAlerts,
	bucketAlerts, bucketAlertsByOrg, bucketAlertsByDomain, bucketAlertDedup, bucketAlertSources,
	bucketFailures, bucketFailureHeaders, bucketFailuresByOrg, bucketFailuresByDomain,
	bucketFailureDedup, bucketFailureRollups,
	bucketTLSReports, bucketTLSByOrg, bucketTLSByDomain, bucketTLSDedup, bucketTLSRollups,
	bucketSourceRollups, bucketRDNSPending, bucketRDNS,
	bucketMailboxes, bucketMailboxesByOrg, bucketMailboxState,
	bucketSessions, bucketSessionsByKey,
	bucketAlertSenders,
	bucketReportCounts,
	bucketDayTotals,
	bucketAccounts, bucketAccountsByEmail, bucketMemberships, bucketMembershipsByOrg,
	bucketMembershipsByAccount, bucketInvitations, bucketInvitationsByOrg,
	bucketSessionsByAccount, bucketAudit,
	bucketNotifySettings, bucketMailOutbox, bucketMailLog, bucketAlertMail, bucketAlertMailWindows,
	bucketExportCursors,
	bucketDigestSent,
	bucketRecordBlocks,
	bucketReportTables,
}

// keySchemaVersion is the key in bucketMeta holding the schema version.
var keySchemaVersion = []byte("schema_version")

// keyRecordsDroppedBefore is the key in bucketMeta of the UTC day (uint32,
// big-endian) before which records were dropped (DropRecordsBefore): a
// report of an earlier day whose records are gone says so.
var keyRecordsDroppedBefore = []byte("records_dropped_before")

// idLen is the length of an id in text form; ids are stored as text.
const idLen = 36

// idKey is the key of an entity in its primary bucket.
func idKey(id string) []byte { return []byte(id) }

// orgNameKey makes organization names unique regardless of case.
func orgNameKey(name string) []byte { return []byte(strings.ToLower(name)) }

// orgPrefix is the prefix shared by every per-organization index key. Ids
// have a fixed length, so no separator is needed.
func orgPrefix(orgID string) []byte { return []byte(orgID) }

// orgTimeIDKey is org id | created_at (big-endian Unix nanoseconds) | id, so
// that a prefix scan over one organization runs in creation order, ties broken
// by the time-ordered id.
func orgTimeIDKey(orgID string, t time.Time, id string) []byte {
	k := make([]byte, 0, idLen+8+idLen)
	k = append(k, orgID...)
	k = binary.BigEndian.AppendUint64(k, timeKey(t))
	return append(k, id...)
}

// idFromOrgTimeIDKey returns the id at the end of an orgTimeIDKey.
func idFromOrgTimeIDKey(k []byte) string {
	if len(k) < idLen {
		return ""
	}
	return string(k[len(k)-idLen:])
}

// timeKey clamps times before 1970 to zero so they still sort first.
func timeKey(t time.Time) uint64 {
	n := t.UnixNano()
	if n < 0 {
		return 0
	}
	return uint64(n)
}

// domainNameKey is org id | domain name: names are unique per organization.
func domainNameKey(orgID, name string) []byte {
	return append(orgPrefix(orgID), name...)
}

// emailKey makes reporting addresses unique regardless of case.
func emailKey(addr string) []byte { return []byte(strings.ToLower(addr)) }

// versionValue encodes a schema version.
func versionValue(v int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// prefixEnd returns the smallest key greater than every key with prefix, or
// nil when there is none (prefix all 0xff).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// binID is the 16-byte form of a canonical id, used where keys repeat the id
// millions of times (records). ok is false for a malformed id.
func binID(id string) (b [16]byte, ok bool) {
	if !ValidID(id) {
		return b, false
	}
	j := 0
	for i := 0; i < len(id); i += 2 {
		if id[i] == '-' {
			i++
		}
		b[j] = unhex(id[i])<<4 | unhex(id[i+1])
		j++
	}
	return b, true
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// recordKey is binary report id | block seq (big-endian): a report's
// records are one contiguous range, in report order.
func recordKey(dst []byte, report [16]byte, seq uint32) []byte {
	dst = append(dst, report[:]...)
	return binary.BigEndian.AppendUint32(dst, seq)
}

// reportKey is domain id | date_begin (big-endian Unix seconds) | the
// first 16 bytes of SHA-256(org_name, 0x00, external report id): one
// domain's reports are a range sorted by date_begin, and a report's
// identity is an exact key. A report is identified by its domain, reporter
// and report id as the API says, with its date_begin in the key so that
// the reports of one day are inserted next to each other instead of all
// over the file (a reporter resending a report resends its date range).
// The same identity under another date_begin is found by the identity
// filter and a scan of the domain's keys (identity_filter.go).
func reportKey(domainID string, begin time.Time, orgName, externalID string) []byte {
	h := sha256.New()
	h.Write([]byte(orgName))
	h.Write([]byte{0})
	h.Write([]byte(externalID))
	k := make([]byte, 0, idLen+8+sha256.Size)
	k = append(k, domainID...)
	k = binary.BigEndian.AppendUint64(k, unixKey(begin))
	return h.Sum(k)[:idLen+8+reportKeyHashLen]
}

// reportKeyHashLen is how much of the identity hash a report key keeps.
const reportKeyHashLen = 16

// reportKeyLen is the length of every reportKey.
const reportKeyLen = idLen + 8 + reportKeyHashLen

// unixKey clamps times before 1970 to zero so they still sort first.
func unixKey(t time.Time) uint64 {
	if s := t.Unix(); s > 0 {
		return uint64(s)
	}
	return 0
}

// rollupKey is domain id | UTC day number (days since 1970, big-endian), so
// a date range of one domain is a key range.
func rollupKey(domainID string, day uint32) []byte {
	k := make([]byte, 0, idLen+4)
	k = append(k, domainID...)
	return binary.BigEndian.AppendUint32(k, day)
}

// codecVersion is the first byte of the binary values the store writes
// itself (package reports writes the rest).
const codecVersion = codec.Version

// errCorrupt reports a stored value that does not decode.
var errCorrupt = codec.ErrCorrupt
