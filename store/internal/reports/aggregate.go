package reports

import "time"

// Geo mirrors geo.Info so that store imports only bbolt; its JSON is API.md's
// "geo" object. A nil field is unknown.
type Geo struct {
	CountryCode *string  `json:"country_code"`
	CountryName *string  `json:"country_name"`
	City        *string  `json:"city"`
	Latitude    *float64 `json:"latitude"`
	Longitude   *float64 `json:"longitude"`
	ASN         *uint32  `json:"asn"`
	ASOrg       *string  `json:"as_org"`
}

// PolicyPublished is the policy the reporter saw published.
type PolicyPublished struct {
	Domain string  `json:"domain"`
	P      string  `json:"p"`
	SP     *string `json:"sp"`
	NP     *string `json:"np"`
	PCT    int     `json:"pct"`
	ADKIM  string  `json:"adkim"`
	ASPF   string  `json:"aspf"`
}

// Report is one stored aggregate report (its metadata; records are read with
// ReportRecords).
type Report struct {
	ID               string          `json:"id"`
	DomainID         string          `json:"domain_id"`
	Domain           string          `json:"domain"`
	OrgID            string          `json:"-"`
	OrgName          string          `json:"org_name"`
	OrgEmail         string          `json:"org_email"`
	ExternalReportID string          `json:"external_report_id"`
	DateBegin        time.Time       `json:"date_begin"`
	DateEnd          time.Time       `json:"date_end"`
	ReceivedAt       time.Time       `json:"received_at"`
	PolicyPublished  PolicyPublished `json:"policy_published"`
	MessageCount     int64           `json:"message_count"`
	DMARCPassCount   int64           `json:"dmarc_pass_count"`
	DMARCFailCount   int64           `json:"dmarc_fail_count"`
	RecordCount      int             `json:"record_count"`
	// RecordsDropped is set (by FindReport only) when the report's records
	// were deleted by the record retention while the report is kept: it
	// lists no records, its counts and summary stay.
	RecordsDropped bool `json:"records_dropped,omitempty"`
}

// Reason is a policy override reason of a record.
type Reason struct {
	Type    string  `json:"type"`
	Comment *string `json:"comment"`
}

// DKIMAuth is one DKIM auth result of a record.
type DKIMAuth struct {
	Domain   string  `json:"domain"`
	Selector *string `json:"selector"`
	Result   string  `json:"result"`
}

// SPFAuth is one SPF auth result of a record.
type SPFAuth struct {
	Domain string  `json:"domain"`
	Scope  *string `json:"scope"`
	Result string  `json:"result"`
}

// AuthResults are the raw auth results of a record.
type AuthResults struct {
	DKIM []DKIMAuth `json:"dkim"`
	SPF  []SPFAuth  `json:"spf"`
}

// Record is one <record> of a report. DMARC is "pass" when DKIM or SPF
// passed, else "fail". DKIM and SPF are "" (JSON null) when the report
// left them out; when it left both out (a legacy report), DMARC is derived
// from AuthResults and DMARCDerived says so (aggregate_verdict.go). Geo is
// nil when no geo database was configured.
type Record struct {
	SourceIP     string      `json:"source_ip"`
	Count        int64       `json:"count"`
	Disposition  string      `json:"disposition"`
	DKIM         Verdict     `json:"dkim"`
	SPF          Verdict     `json:"spf"`
	DMARC        string      `json:"dmarc"`
	DMARCDerived bool        `json:"dmarc_derived"`
	HeaderFrom   string      `json:"header_from"`
	EnvelopeFrom *string     `json:"envelope_from"`
	EnvelopeTo   *string     `json:"envelope_to"`
	Reasons      []Reason    `json:"reasons"`
	AuthResults  AuthResults `json:"auth_results"`
	Geo          *Geo        `json:"geo"`
}
