package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Options tune Open. A nil *Options means the defaults.
type Options struct {
	// Timeout is how long Open waits for the file lock; 0 means 1s.
	Timeout time.Duration
	// ReadOnly opens the file with a shared lock; writes then fail.
	ReadOnly bool
	// NoSync skips the fsync of every commit: for a file filled in bulk
	// that is thrown away if the process dies (tests, benchmarks). A
	// crash may lose or corrupt what was committed.
	NoSync bool
}

// DB is the dmarcd database: one bbolt file and the clock its writes stamp.
type DB struct {
	// Now returns the current time. It defaults to the wall clock; tests pin
	// it. The store keeps its result in UTC at second precision.
	Now func() time.Time

	bolt *bolt.DB

	// domainVersions changes with every domain write (see DomainsVersion).
	domainVersions versions
	// auth caches Authenticate (see authCache).
	auth authCache
	// alerts holds the alert rules' settings and hook (alert_rules.go).
	alerts alertSettings
	// idents filters the identities of the stored aggregate reports for the
	// dedup check (identity_filter.go); see identities.
	idents   atomic.Pointer[identityFilter]
	identsMu sync.Mutex
	// identScans counts the scans of filters replaced since Open.
	identScans atomic.Int64
	// names caches DomainsNamed (lookup.go).
	names nameCache
	// drafts are what report drafts learn from the reports before them.
	drafts draftHints
	// blocks caches the sealed record blocks read last (record_block.go).
	blocks blockCache
	// tables caches the report tables read last (report_table.go).
	tables tableCache
}

// defaultLockTimeout is how long Open waits for the lock when Options say 0.
const defaultLockTimeout = time.Second

// verifyLockTimeout is short: VerifyFile is for copies nobody should hold.
const verifyLockTimeout = 100 * time.Millisecond

// Open opens or creates the database at path, creating missing buckets and
// running migrations up to SchemaVersion (read-only: the file must already be
// at SchemaVersion). The error wraps ErrLocked when the lock is not obtained
// within Options.Timeout, and ErrInvalid when the file is not a dmarcd
// database or is newer than SchemaVersion.
func Open(path string, opts *Options) (*DB, error) {
	return open(path, opts, migrations)
}

func open(path string, opts *Options, migs []migration) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultLockTimeout
	}
	bdb, err := openBolt(path, o)
	if err != nil {
		return nil, err
	}
	err = survive(func() error {
		if o.ReadOnly {
			return bdb.View(func(tx *bolt.Tx) error { return checkReadable(tx, len(migs)) })
		}
		return bdb.Update(func(tx *bolt.Tx) error { return upgrade(tx, migs) })
	})
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{Now: wallClock, bolt: bdb}
	if !o.ReadOnly {
		// Before any writer can store a report the filter would miss.
		_ = bdb.View(func(tx *bolt.Tx) error {
			db.idents.Store(buildIdentityFilter(tx))
			return nil
		})
		if _, err := db.backfillSourceRollups(backfillRecords); err != nil {
			_ = bdb.Close()
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	}
	return db, nil
}

// openBolt opens the file with mode 0600: it holds key hashes and secrets.
func openBolt(path string, o Options) (*bolt.DB, error) {
	var bdb *bolt.DB
	// bolt.Open reads the freelist, which may panic on a corrupt file.
	err := survive(func() error {
		var err error
		bdb, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.Timeout, ReadOnly: o.ReadOnly, NoSync: o.NoSync})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store: open %s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return bdb, nil
}

func wallClock() time.Time { return time.Now() }

// now is the time a write stamps: UTC, whole seconds, as the API shows it.
func (db *DB) now() time.Time {
	clock := db.Now
	if clock == nil {
		clock = wallClock
	}
	return clock().UTC().Truncate(time.Second)
}

// Close releases the file and its lock.
func (db *DB) Close() error {
	return wrap("close", db.bolt.Close())
}

// IOStats count the pages commits wrote since Open.
type IOStats struct {
	PageWrites int64         // pages written
	WriteTime  time.Duration // time spent writing and syncing them
}

// IOStats returns the page writes of the commits since Open: what a
// benchmark of ingest reports beside its throughput.
func (db *DB) IOStats() IOStats {
	st := db.bolt.Stats().TxStats
	return IOStats{PageWrites: st.GetWrite(), WriteTime: st.GetWriteTime()}
}

// Check runs bbolt's consistency check over the whole file and returns every
// problem found, joined, or nil.
func (db *DB) Check() error {
	// A read-only tx.Check races with concurrent writers (it reads the live
	// freelist), so hold the writer lock and roll back: nothing is written.
	writable := !db.bolt.IsReadOnly()
	tx, err := db.bolt.Begin(writable)
	if err != nil {
		return wrap("check", err)
	}
	defer func() { _ = tx.Rollback() }()
	return wrap("check", checkTx(tx))
}

func checkTx(tx *bolt.Tx) error {
	var errs []error
	for err := range tx.Check() {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Backup writes a consistent copy of the whole file to w while the database
// stays in use, and returns the number of bytes written.
func (db *DB) Backup(w io.Writer) (int64, error) {
	var n int64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	return n, wrap("backup", err)
}

// VerifyFile checks that path is a sound dmarcd database this program can
// open: a bbolt file with a meta bucket, a schema version between 1 and
// SchemaVersion, and no consistency errors. It opens the file read-only and
// waits only briefly for the lock (error wrapping ErrLocked). A file that is
// not a dmarcd database gives an error wrapping ErrInvalid.
func VerifyFile(path string) error {
	bdb, err := openBolt(path, Options{Timeout: verifyLockTimeout, ReadOnly: true})
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return err
		}
		return fmt.Errorf("store: verify %s: not a bbolt file: %w: %w", path, ErrInvalid, err)
	}
	defer func() { _ = bdb.Close() }()
	err = survive(func() error {
		return bdb.View(func(tx *bolt.Tx) error {
			// Check first: it survives corrupt pages that make plain reads panic.
			if err := checkTx(tx); err != nil {
				return errorf(ErrInvalid, "database file is corrupt: %v", err)
			}
			v, err := readVersion(tx)
			if err != nil {
				return err
			}
			if v < 1 || v > SchemaVersion {
				return errorf(ErrInvalid, "schema version %d is not between 1 and %d", v, SchemaVersion)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("store: verify %s: %w", path, err)
	}
	return nil
}

// survive runs fn, turning the panics bbolt raises on a corrupt file (and
// faults on its memory map) into an error wrapping ErrInvalid, so that a bad
// file given to Open or VerifyFile fails instead of crashing the process.
func survive(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = errorf(ErrInvalid, "database file is corrupt: %v", r)
		}
	}()
	return fn()
}

// lastWithPrefix moves c to the last key that starts with prefix and returns
// it, or nil when there is none. Used to scan one organization newest first.
func lastWithPrefix(c *bolt.Cursor, prefix []byte) []byte {
	var k []byte
	if end := prefixEnd(prefix); end == nil {
		k, _ = c.Last()
	} else if k, _ = c.Seek(end); k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}

// countPrefix counts the keys of b that start with prefix.
func countPrefix(b *bolt.Bucket, prefix []byte) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		n++
	}
	return n
}

// prevWithPrefix steps c back and returns the key if it still has prefix.
func prevWithPrefix(c *bolt.Cursor, prefix []byte) []byte {
	k, _ := c.Prev()
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}
