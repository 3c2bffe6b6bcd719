package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Exporting the stored reports to another system (the ClickHouse sink):
// the reports of each kind in storage order after a cursor, and the
// cursor itself, kept in the file so an export survives restarts.
//
// Storage order is id order: each kind's primary bucket is keyed by the
// report's id in text form, and ids are UUIDv7 (id.go), time-ordered, so a
// key scan lists the reports in the order their ids were made. That is not
// quite the order they became visible: an aggregate report's id is made
// when its parsing starts, and a large report is committed in several
// transactions (its records under a pending marker first), so a report may
// appear after reports with larger ids. OldestPendingReport names the
// oldest such report still being written; an exporter keeps its cursor
// below it and below a settling time, and skips what it exported above the
// cursor (package export/clickhouse). Across restarts ids keep growing as
// long as the clock does not step back by more than that settling time.

// ExportKind is a kind of stored report an export reads.
type ExportKind string

// The kinds of stored reports, in the order an export reads them.
const (
	ExportAggregate ExportKind = "aggregate"
	ExportFailure   ExportKind = "failure"
	ExportTLS       ExportKind = "tls"
)

// ExportKinds lists every kind, in the order an export reads them.
var ExportKinds = []ExportKind{ExportAggregate, ExportFailure, ExportTLS}

// ExportCursor is how far a sink has exported: for each kind, the id up to
// which (included) every stored report was acknowledged; "" before the
// first. Rows counts the rows acknowledged since the cursor was created.
type ExportCursor struct {
	Aggregate string    `json:"aggregate"`
	Failure   string    `json:"failure"`
	TLS       string    `json:"tls"`
	Rows      uint64    `json:"rows"`
	UpdatedAt time.Time `json:"updated_at"`
	// Rewound is when a backfill last moved the cursor back (zero when
	// never), and RewoundTo the time it moved it to.
	Rewound   time.Time `json:"rewound,omitzero"`
	RewoundTo time.Time `json:"rewound_to,omitzero"`
}

// Of returns the cursor's id for kind.
func (c *ExportCursor) Of(kind ExportKind) string {
	switch kind {
	case ExportFailure:
		return c.Failure
	case ExportTLS:
		return c.TLS
	}
	return c.Aggregate
}

// Set moves the cursor's id for kind to id.
func (c *ExportCursor) Set(kind ExportKind, id string) {
	switch kind {
	case ExportFailure:
		c.Failure = id
	case ExportTLS:
		c.TLS = id
	default:
		c.Aggregate = id
	}
}

// ExportCursor returns the cursor of sink name, a zero cursor when it has
// none yet.
func (db *DB) ExportCursor(name string) (*ExportCursor, error) {
	c := &ExportCursor{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketExportCursors).Get([]byte(name))
		if raw == nil {
			return nil
		}
		return json.Unmarshal(raw, c)
	})
	if err != nil {
		return nil, wrap("export cursor", err)
	}
	return c, nil
}

// SetExportCursor stores c as the cursor of sink name, stamping UpdatedAt.
// It never moves an id back over a rewind that happened meanwhile: when
// the stored cursor was rewound after prev (the Rewound time c started
// from), the stored one wins for the ids and c's Rows are kept; the
// returned cursor is what is stored.
func (db *DB) SetExportCursor(name string, c *ExportCursor) (*ExportCursor, error) {
	out := *c
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExportCursors)
		if raw := b.Get([]byte(name)); raw != nil {
			var cur ExportCursor
			if err := json.Unmarshal(raw, &cur); err != nil {
				return err
			}
			if cur.Rewound.After(c.Rewound) {
				out.Aggregate, out.Failure, out.TLS = cur.Aggregate, cur.Failure, cur.TLS
				out.Rewound, out.RewoundTo = cur.Rewound, cur.RewoundTo
			}
		}
		out.UpdatedAt = db.now()
		raw, err := json.Marshal(&out)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), raw)
	})
	if err != nil {
		return nil, wrap("set export cursor", err)
	}
	return &out, nil
}

// RewindExportCursor moves every id of sink name's cursor back to just
// before the reports stored at since (when it is not there already), so
// the sink exports them again, and returns the stored cursor.
func (db *DB) RewindExportCursor(name string, since time.Time) (*ExportCursor, error) {
	floor := IDFloor(since)
	var out ExportCursor
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketExportCursors)
		if raw := b.Get([]byte(name)); raw != nil {
			if err := json.Unmarshal(raw, &out); err != nil {
				return err
			}
		}
		for _, k := range ExportKinds {
			if cur := out.Of(k); cur > floor {
				out.Set(k, floor)
			}
		}
		now := db.now()
		out.UpdatedAt, out.Rewound, out.RewoundTo = now, now, since.UTC()
		raw, err := json.Marshal(&out)
		if err != nil {
			return err
		}
		return b.Put([]byte(name), raw)
	})
	if err != nil {
		return nil, wrap("rewind export cursor", err)
	}
	return &out, nil
}

// IDFloor returns the text form of an id that sorts below every id made at
// t or later and above every id made before t's millisecond: the cursor
// position that exports everything stored from t on. A time before 1970
// gives the smallest id.
func IDFloor(t time.Time) string {
	ms := max(t.UnixMilli(), 0)
	var b [16]byte
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(ms))
	copy(b[0:6], ts[2:8])
	return formatUUID(b)
}

// IDTime returns the time (to the millisecond) a time-ordered id was made,
// false when id is not one.
func IDTime(id string) (time.Time, bool) {
	if !ValidID(id) || id[14] != '7' {
		return time.Time{}, false
	}
	var ts [8]byte
	if _, err := hex.Decode(ts[2:6], []byte(id[0:8])); err != nil {
		return time.Time{}, false
	}
	if _, err := hex.Decode(ts[6:8], []byte(id[9:13])); err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ts[:]))).UTC(), true
}

// StoredReport is one stored report of any kind as an export reads it:
// the field of its Kind is set. An aggregate report's records are read
// with ReportRecords.
type StoredReport struct {
	Kind      ExportKind
	ID        string
	OrgID     string
	Aggregate *Report
	Failure   *FailureReportDetail
	TLS       *TLSReportDetail
}

// ReportsStoredAfter returns up to limit reports of kind whose id sorts
// after after ("" for the first), in storage order (see above), skipping
// those skip reports true for (already exported; nil skips none). Failure
// reports come with their headers, TLS reports with their policies. It
// reads in one short transaction.
func (db *DB) ReportsStoredAfter(kind ExportKind, after string, limit int, skip func(id string) bool) ([]StoredReport, error) {
	var bucket []byte
	switch kind {
	case ExportAggregate:
		bucket = bucketReports
	case ExportFailure:
		bucket = bucketFailures
	case ExportTLS:
		bucket = bucketTLSReports
	default:
		return nil, errorf(ErrInvalid, "unknown export kind %q", kind)
	}
	var out []StoredReport
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		k, _ := c.Seek([]byte(after))
		if k != nil && bytes.Equal(k, []byte(after)) {
			k, _ = c.Next()
		}
		for ; k != nil && len(out) < limit; k, _ = c.Next() {
			id := string(k)
			if skip != nil && skip(id) {
				continue
			}
			r := StoredReport{Kind: kind, ID: id}
			switch kind {
			case ExportAggregate:
				rep, _, err := getReport(tx, &db.tables, id, false)
				if err != nil {
					return fmt.Errorf("report %s: %w", id, err)
				}
				r.Aggregate, r.OrgID = rep, rep.OrgID
			case ExportFailure:
				det, err := getFailure(tx, id, true)
				if err != nil {
					return fmt.Errorf("failure report %s: %w", id, err)
				}
				r.Failure, r.OrgID = det, det.OrgID
			case ExportTLS:
				det, err := getTLS(tx, id)
				if err != nil {
					return fmt.Errorf("TLS report %s: %w", id, err)
				}
				r.TLS, r.OrgID = det, det.OrgID
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("reports stored after", err)
	}
	return out, nil
}

// OldestPendingReport returns the id of the oldest aggregate report whose
// records are being written in several transactions and that is not
// visible yet, "" when there is none: such a report becomes visible after
// reports with larger ids.
func (db *DB) OldestPendingReport() (string, error) {
	var id string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketReportsPending).Cursor().First()
		if len(k) == 16 {
			id = formatUUID([16]byte(k))
		}
		return nil
	})
	if err != nil {
		return "", wrap("oldest pending report", err)
	}
	return id, nil
}
