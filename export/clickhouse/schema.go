package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The tables. Every one is a ReplacingMergeTree whose sorting key ends
// with the row's identity (report id, and the record's index in its
// report), versioned by the export time: exporting a report again (after
// a crash, a backfill) writes the same rows, which merges and FINAL
// collapse to one. Partitions are months of the report's UTC day.
type column struct {
	name, typ string
	low       bool // a String worth LowCardinality where the server has it
	codec     string
}

type table struct {
	name    string
	cols    []column
	orderBy string
}

func str(name string) column    { return column{name: name, typ: "String"} }
func lowStr(name string) column { return column{name: name, typ: "String", low: true} }

var (
	// common leads every table: who and which domain the row is about.
	common = []column{lowStr("org_id"), lowStr("org_name"), lowStr("domain_id"), lowStr("domain"),
		{name: "day", typ: "Date"}, str("report_id")}
	version = column{name: "version", typ: "UInt64"}

	tables = []table{
		{name: "aggregate_reports", orderBy: "org_id, domain, day, report_id", cols: cat(common,
			lowStr("reporter"), lowStr("reporter_email"), str("external_report_id"),
			column{name: "date_begin", typ: "DateTime('UTC')"}, column{name: "date_end", typ: "DateTime('UTC')"},
			column{name: "received_at", typ: "DateTime('UTC')"},
			lowStr("policy_domain"), lowStr("policy_p"), lowStr("policy_sp"), column{name: "policy_pct", typ: "UInt8"},
			lowStr("policy_adkim"), lowStr("policy_aspf"),
			column{name: "message_count", typ: "UInt64"}, column{name: "dmarc_pass_count", typ: "UInt64"},
			column{name: "dmarc_fail_count", typ: "UInt64"}, column{name: "record_count", typ: "UInt32"}, version)},
		{name: "aggregate_records", orderBy: "org_id, domain, day, source_ip, report_id, record_index", cols: cat(common,
			column{name: "record_index", typ: "UInt32"}, str("source_ip"),
			lowStr("reporter"), column{name: "date_begin", typ: "DateTime('UTC')"},
			column{name: "count", typ: "UInt64", codec: "T64, LZ4"},
			lowStr("disposition"), lowStr("dkim"), lowStr("spf"), lowStr("dmarc"),
			column{name: "dmarc_derived", typ: "UInt8"}, lowStr("header_from"), lowStr("envelope_from"), lowStr("envelope_to"),
			column{name: "reasons", typ: "Array(String)"},
			column{name: "dkim_domains", typ: "Array(String)"}, column{name: "dkim_selectors", typ: "Array(String)"},
			column{name: "dkim_results", typ: "Array(String)"},
			column{name: "spf_domains", typ: "Array(String)"}, column{name: "spf_scopes", typ: "Array(String)"},
			column{name: "spf_results", typ: "Array(String)"},
			lowStr("country_code"), lowStr("city"), column{name: "asn", typ: "UInt32"}, lowStr("as_org"),
			lowStr("policy_p"), version)},
		{name: "failure_reports", orderBy: "org_id, domain, day, source_ip, report_id", cols: cat(common,
			column{name: "received_at", typ: "DateTime('UTC')"}, column{name: "arrival_date", typ: "DateTime('UTC')"},
			lowStr("reporter"), str("source_ip"), str("original_mail_from"), str("original_rcpt_to"),
			lowStr("reported_domain"), str("subject"), str("message_id"), lowStr("feedback_type"),
			column{name: "auth_failure", typ: "Array(String)"}, lowStr("delivery_result"),
			lowStr("dmarc_result"), lowStr("spf_result"), lowStr("dkim_result"),
			lowStr("dkim_domain"), lowStr("dkim_selector"),
			lowStr("country_code"), column{name: "asn", typ: "UInt32"}, lowStr("as_org"), version)},
		{name: "tls_reports", orderBy: "org_id, domain, day, report_id", cols: cat(common,
			lowStr("reporter"), str("external_report_id"), str("contact_info"),
			column{name: "date_begin", typ: "DateTime('UTC')"}, column{name: "date_end", typ: "DateTime('UTC')"},
			column{name: "received_at", typ: "DateTime('UTC')"},
			column{name: "successful_sessions", typ: "UInt64"}, column{name: "failed_sessions", typ: "UInt64"}, version)},
		{name: "tls_failure_details", orderBy: "org_id, domain, day, sending_mta_ip, report_id, policy_index, detail_index", cols: cat(common,
			column{name: "policy_index", typ: "UInt16"}, column{name: "detail_index", typ: "UInt16"},
			lowStr("reporter"), lowStr("policy_type"), lowStr("policy_domain"), lowStr("result_type"),
			str("sending_mta_ip"), lowStr("receiving_mx_hostname"), lowStr("receiving_mx_helo"), str("receiving_ip"),
			column{name: "failed_sessions", typ: "UInt64"}, str("additional_information"), lowStr("failure_reason_code"), version)},
	}
)

// insert is the INSERT of t's rows in db, naming every column in the
// order rowBuf writes them.
func (t *table) insert(db string) string {
	names := make([]string, len(t.cols))
	for i, c := range t.cols {
		names[i] = "`" + c.name + "`"
	}
	return fmt.Sprintf("INSERT INTO `%s`.`%s` (%s) FORMAT RowBinary", db, t.name, strings.Join(names, ", "))
}

func cat(head []column, tail ...column) []column {
	return append(append([]column(nil), head...), tail...)
}

// features are what the server's version() allows in the DDL.
type features struct {
	version        string
	lowCardinality bool // LowCardinality(String) without experimental settings
	codecs         bool // column CODECs
}

// featuresOf reads a version() answer ("18.16.1", "24.8.4.13"). Both
// features came in 19.x (LowCardinality still behind a setting early on,
// codecs in 19.1); 20.1 and later have both for sure.
func featuresOf(v string) (features, error) {
	v = strings.TrimSpace(v)
	parts := strings.SplitN(v, ".", 3)
	major, err := strconv.Atoi(parts[0])
	if err != nil || len(parts) < 2 {
		return features{}, fmt.Errorf("clickhouse: version() answered %q", v)
	}
	return features{version: v, lowCardinality: major >= 20, codecs: major >= 20}, nil
}

// createTables returns the CREATE TABLE statements for the server's
// features: in db, the tables themselves, or with a cluster the local
// tables (name_local) and Distributed tables over them, sharded by
// organization and domain.
func createTables(f features, db, cluster string) []string {
	var out []string
	for _, t := range tables {
		var cols []string
		for _, c := range t.cols {
			typ := c.typ
			if c.low && f.lowCardinality {
				typ = "LowCardinality(" + typ + ")"
			}
			def := "`" + c.name + "` " + typ
			if c.codec != "" && f.codecs {
				def += " CODEC(" + c.codec + ")"
			}
			cols = append(cols, def)
		}
		local := t.name
		if cluster != "" {
			local = t.name + "_local"
		}
		out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.`%s` (%s) ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMM(day) ORDER BY (%s)",
			db, local, strings.Join(cols, ", "), t.orderBy))
		if cluster != "" {
			out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.`%s` AS `%s`.`%s` ENGINE = Distributed(%s, %s, %s, cityHash64(org_id, domain))",
				db, t.name, db, local, cluster, db, local))
		}
	}
	return out
}

// ensureTables reads the server's version and creates the tables that
// are missing; it returns the features used.
func (c *client) ensureTables(ctx context.Context) (features, error) {
	v, err := c.exec(ctx, "SELECT version()", nil)
	if err != nil {
		return features{}, err
	}
	f, err := featuresOf(string(v))
	if err != nil {
		return features{}, err
	}
	if _, err := c.exec(ctx, "CREATE DATABASE IF NOT EXISTS `"+c.ep.Database+"`", nil); err != nil {
		return f, err
	}
	for _, q := range createTables(f, c.ep.Database, c.ep.Cluster) {
		if _, err := c.exec(ctx, q, nil); err != nil {
			return f, err
		}
	}
	return f, nil
}
