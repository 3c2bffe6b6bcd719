package cli

import (
	"context"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/export/clickhouse"
	"github.com/dmarcd/dmarcd/metrics"
)

// exportOptions are the flags of the ClickHouse sink (--export-clickhouse*).
type exportOptions struct {
	ClickHouse   string
	PasswordFile string
	Cluster      string
}

// clickhousePasswordEnv carries the ClickHouse password when no file does.
const clickhousePasswordEnv = "DMARCD_CLICKHOUSE_PASSWORD"

func (o *exportOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.ClickHouse, "export-clickhouse", "", "stream every stored report into ClickHouse at this HTTP URL, e.g. http://dmarcd@ch.internal:8123/?database=dmarc (docs/clickhouse.md; default: no export)")
	f.StringVar(&o.PasswordFile, "export-clickhouse-password-file", "", "file holding the ClickHouse user's password (default: $"+clickhousePasswordEnv+")")
	f.StringVar(&o.Cluster, "export-clickhouse-cluster", "", "ClickHouse cluster (remote_servers) to spread the tables over: local tables <name>_local and Distributed tables over them, sharded by organization and domain")
}

// endpoint checks the flags; nil when no export is configured.
func (o *exportOptions) endpoint() (*clickhouse.Endpoint, error) {
	if o.ClickHouse == "" {
		if o.PasswordFile != "" || o.Cluster != "" {
			return nil, usagef("--export-clickhouse-password-file and --export-clickhouse-cluster need --export-clickhouse")
		}
		return nil, nil
	}
	password := os.Getenv(clickhousePasswordEnv)
	if o.PasswordFile != "" {
		raw, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return nil, usagef("--export-clickhouse-password-file: %v", err)
		}
		password = strings.TrimRight(string(raw), "\r\n")
	}
	ep, err := clickhouse.ParseEndpoint(o.ClickHouse, password, o.Cluster)
	if err != nil {
		return nil, usagef("--export-clickhouse: %v", err)
	}
	return ep, nil
}

// testExportBatchEnv makes the sink's batches this many rows. It is for
// the end-to-end tests only, which kill the server in the middle of an
// export and need one to last long enough; it is not a setting.
const testExportBatchEnv = "DMARCD_TEST_CLICKHOUSE_BATCH_ROWS"

// buildExport builds the ClickHouse sink when --export-clickhouse is set.
func (s *server) buildExport() error {
	ep, err := s.o.Export.endpoint()
	if err != nil || ep == nil {
		return err
	}
	cfg := clickhouse.Config{Store: s.db, Endpoint: ep, Resolver: s.resolver, Policy: s.hookPolicy, Log: s.log}
	if n, err := strconv.Atoi(os.Getenv(testExportBatchEnv)); err == nil && n > 0 {
		cfg.BatchRows = n
	}
	s.export, err = clickhouse.New(cfg)
	if err != nil {
		return err
	}
	registerExportMetrics(s.reg, s.export)
	return nil
}

// runExport runs the sink until ctx ends; nothing without one.
func (s *server) runExport(ctx context.Context) {
	if s.export != nil {
		_ = s.export.Run(ctx)
	}
}

// registerExportMetrics shows the sink's state on /metrics.
func registerExportMetrics(reg *metrics.Registry, sink *clickhouse.Sink) {
	reg.CounterFunc("dmarcd_clickhouse_export_rows_total", "Rows ClickHouse acknowledged since the server started.",
		func() float64 { return float64(sink.Status().Rows) })
	reg.CounterFunc("dmarcd_clickhouse_export_errors_total", "Failed ClickHouse export attempts since the server started.",
		func() float64 { return float64(sink.Status().Errors) })
	reg.GaugeFunc("dmarcd_clickhouse_export_lag_seconds", "Age of the oldest stored report ClickHouse has not acknowledged (0: none).",
		func() float64 { return sink.Status().LagSeconds })
	reg.GaugeFunc("dmarcd_clickhouse_export_cursor_timestamp_seconds", "When the newest aggregate report under the export cursor was stored (Unix seconds).",
		func() float64 {
			t := sink.Status().CursorTime
			if t.IsZero() {
				return 0
			}
			return float64(t.Unix())
		})
	reg.GaugeFunc("dmarcd_clickhouse_export_last_success_timestamp_seconds", "When ClickHouse last acknowledged a batch (Unix seconds).",
		func() float64 {
			t := sink.Status().LastExportAt
			if t.IsZero() {
				return 0
			}
			return float64(t.Unix())
		})
}

// exportGate is the record-retention gate: with the sink on, a report's
// records may be dropped only once ClickHouse acknowledged the report;
// without it, always. (worker.Retention's RecordsExported takes it.)
func (s *server) exportGate() func(reportID string) bool {
	if s.export == nil {
		return nil
	}
	return s.export.Exported
}
