package alert

import (
	"errors"
	"time"
)

// Rules are the thresholds of the report rules. The zero value is not
// valid; start from DefaultRules.
type Rules struct {
	// Disabled turns the report and failure report rules off: no alert, no
	// source learning.
	Disabled bool
	// FailureRateWarning and FailureRateCritical are DMARC failure rates
	// (0..1] of a report that raise dmarc_failure_rate.
	FailureRateWarning, FailureRateCritical float64
	// MinFailing is the fewest failing messages a report needs to raise
	// dmarc_failure_rate.
	MinFailing int64
	// NewSourceDays is how long a source stays known after its last report.
	NewSourceDays int
	// MaxReportAge is how old a report's date_end may be for it to raise
	// alerts.
	MaxReportAge time.Duration
	// MaxNewSourceAlerts caps new_failing_source alerts per domain per day.
	MaxNewSourceAlerts int
	// TLSFailureRateWarning and TLSFailureRateCritical are shares (0..1]
	// of a TLS report's sessions that failed which raise tls_failure_rate;
	// TLSMinFailed is the fewest failed sessions that can.
	TLSFailureRateWarning, TLSFailureRateCritical float64
	TLSMinFailed                                  int64
	// NewSenderShare is the least share (0..1] of the current window's
	// messages a new sender needs to raise new_sender (sender.go).
	NewSenderShare float64
	// BaselineDays are the days from a domain's first report whose
	// senders are its baseline: none of them is new.
	BaselineDays int
	// PolicyReadyRepeatDays is how long a stage that raised policy_ready
	// does not raise it again.
	PolicyReadyRepeatDays int
}

// DefaultRules returns the thresholds of DESIGN.md.
func DefaultRules() Rules {
	return Rules{
		FailureRateWarning:  0.10,
		FailureRateCritical: 0.50,
		MinFailing:          10,
		NewSourceDays:       30,
		MaxReportAge:        7 * 24 * time.Hour,
		MaxNewSourceAlerts:  10,

		TLSFailureRateWarning:  0.05,
		TLSFailureRateCritical: 0.25,
		TLSMinFailed:           10,

		NewSenderShare:        0.01,
		BaselineDays:          7,
		PolicyReadyRepeatDays: 7,
	}
}

// Validate returns an error naming the first bad setting.
func (r Rules) Validate() error {
	switch {
	case !(r.FailureRateWarning > 0 && r.FailureRateWarning <= 1):
		return errors.New("the failure rate warning threshold must be over 0 and at most 1")
	case !(r.FailureRateCritical >= r.FailureRateWarning && r.FailureRateCritical <= 1):
		return errors.New("the failure rate critical threshold must be between the warning threshold and 1")
	case r.MinFailing < 1:
		return errors.New("the minimum of failing messages must be at least 1")
	case r.NewSourceDays < 1 || r.NewSourceDays > 3650:
		return errors.New("the new source window must be 1 to 3650 days")
	case r.MaxReportAge <= 0:
		return errors.New("the report age limit must be positive")
	case r.MaxNewSourceAlerts < 1:
		return errors.New("the new source alert cap must be at least 1")
	case !(r.TLSFailureRateWarning > 0 && r.TLSFailureRateWarning <= 1):
		return errors.New("the TLS failure rate warning threshold must be over 0 and at most 1")
	case !(r.TLSFailureRateCritical >= r.TLSFailureRateWarning && r.TLSFailureRateCritical <= 1):
		return errors.New("the TLS failure rate critical threshold must be between the warning threshold and 1")
	case r.TLSMinFailed < 1:
		return errors.New("the minimum of failed TLS sessions must be at least 1")
	case !(r.NewSenderShare > 0 && r.NewSenderShare <= 1):
		return errors.New("the new sender share must be over 0 and at most 1")
	case r.BaselineDays < 0 || r.BaselineDays > 365:
		return errors.New("the sender baseline must be 0 to 365 days")
	case r.PolicyReadyRepeatDays < 1 || r.PolicyReadyRepeatDays > 365:
		return errors.New("the policy_ready repeat period must be 1 to 365 days")
	}
	return nil
}
