package cli

import (
	"strings"
	"testing"
	"time"
)

// TestFailureRetentionAlias ensures the deprecated --forensic-retention and
// DMARCD_FORENSIC_RETENTION still set the failure report retention, with a
// warning, and that the new name wins over the old one in the environment,
// and the command line over the environment.
func TestFailureRetentionAlias(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
		warn string // in stderr; "" wants no warning
	}{
		{"default", nil, nil, 90 * day, ""},
		{"new flag", []string{"--failure-retention", "1h"}, nil, time.Hour, ""},
		{"old flag", []string{"--forensic-retention", "2h"}, nil, 2 * time.Hour, "--forensic-retention"},
		{"new env", nil, map[string]string{"DMARCD_FAILURE_RETENTION": "3h"}, 3 * time.Hour, ""},
		{"old env", nil, map[string]string{"DMARCD_FORENSIC_RETENTION": "4h"}, 4 * time.Hour, "DMARCD_FORENSIC_RETENTION is deprecated, use DMARCD_FAILURE_RETENTION"},
		{"new env over old env", nil, map[string]string{"DMARCD_FAILURE_RETENTION": "5h", "DMARCD_FORENSIC_RETENTION": "6h"}, 5 * time.Hour, ""},
		{"old flag over new env", []string{"--forensic-retention", "7h"}, map[string]string{"DMARCD_FAILURE_RETENTION": "8h"}, 7 * time.Hour, "--forensic-retention"},
		{"new flag over old env", []string{"--failure-retention", "9h"}, map[string]string{"DMARCD_FORENSIC_RETENTION": "10h"}, 9 * time.Hour, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			o, got, err := parseServeOutput(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if o.FailureRetention != c.want {
				t.Errorf("retention %s, want %s", o.FailureRetention, c.want)
			}
			switch {
			case c.warn == "" && got != "":
				t.Errorf("unexpected output %q", got)
			case !strings.Contains(got, c.warn):
				t.Errorf("output %q, want a warning about %s", got, c.warn)
			}
		})
	}
}

// TestFailureRetentionAliasChecked ensures a bad value given by the old
// name is refused under the new one, before serve starts.
func TestFailureRetentionAliasChecked(t *testing.T) {
	code, _, errOut := run(t, nil, "serve", "--data-dir", t.TempDir(), "--reporting-domain", "reports.test",
		"--listen", "127.0.0.1:0", "--forensic-retention", "-1h")
	if code != 2 || !strings.Contains(errOut, "--failure-retention must not be negative") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming --failure-retention", code, errOut)
	}
}
