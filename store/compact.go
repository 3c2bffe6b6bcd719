package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Compaction. bbolt never gives freed pages back to the file system:
// after a retention run or a domain's deletion dmarcd.db stays at its peak
// size, and so does a raw copy of it. Compaction copies every key into a
// fresh file (bbolt's Compact, pages filled full), which is as large as
// the data. Compacting seals every record not sealed yet first
// (record_seal.go), so the copy holds records in their dense form only.

// compactTxBytes bounds one transaction of the copy, so memory stays flat.
const compactTxBytes = 64 << 20

// CompactStats says what a compaction did: the file's size before and
// after, and how long it took.
type CompactStats struct {
	Before, After int64
	Took          time.Duration
}

// CompactFile compacts the database at path in place, offline: it takes
// the file's lock (waiting at most timeout; ErrLocked when a server holds
// it), writes a compacted copy beside it, checks the copy (VerifyFile:
// tx.Check clean) and renames it over path while still holding the lock.
// The original is untouched when anything fails. progress, when not nil,
// is called now and then with the bytes written and the bytes expected
// (an estimate: the file's size less its free pages).
func CompactFile(path string, timeout time.Duration, progress func(done, total int64)) (CompactStats, error) {
	start := time.Now()
	if _, err := os.Stat(path); err != nil {
		return CompactStats{}, fmt.Errorf("store: compact: %w", err)
	}
	src, err := openBolt(path, Options{Timeout: timeout})
	if err != nil {
		return CompactStats{}, err
	}
	defer func() { _ = src.Close() }()
	var version int
	if err := src.View(func(tx *bolt.Tx) error { var err error; version, err = readVersion(tx); return err }); err != nil {
		return CompactStats{}, fmt.Errorf("store: compact %s: %w", path, err)
	}
	if version == SchemaVersion {
		// Records not sealed yet (open days) are sealed first: the copy
		// then holds every record in its dense form. A later report of
		// such a day is sealed into a block of its own.
		if _, err := sealRecords(context.Background(), src, SealOptions{All: true, Now: time.Now()}); err != nil {
			return CompactStats{}, fmt.Errorf("store: compact %s: seal records: %w", path, err)
		}
	}
	tmp := path + ".compacting"
	st, err := compactInto(src, tmp, progress)
	if err != nil {
		return st, fmt.Errorf("store: compact %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return st, fmt.Errorf("store: compact %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	st.Took = time.Since(start)
	return st, nil
}

// CompactCopy writes a compacted copy of the database file src, which
// nobody else may be writing (a raw backup), to dst, and checks it.
func CompactCopy(src, dst string, progress func(done, total int64)) (CompactStats, error) {
	start := time.Now()
	s, err := openBolt(src, Options{Timeout: verifyLockTimeout, ReadOnly: true})
	if err != nil {
		return CompactStats{}, err
	}
	defer func() { _ = s.Close() }()
	st, err := compactInto(s, dst, progress)
	if err != nil {
		return st, fmt.Errorf("store: compact %s: %w", src, err)
	}
	st.Took = time.Since(start)
	return st, nil
}

// compactInto copies src into a new file dst (removed first, and again on
// failure) and verifies it.
func compactInto(src *bolt.DB, dst string, progress func(done, total int64)) (st CompactStats, err error) {
	fi, err := os.Stat(src.Path())
	if err != nil {
		return st, err
	}
	st.Before = fi.Size()
	bs := src.Stats()
	total := st.Before - int64(bs.FreePageN+bs.PendingPageN)*int64(src.Info().PageSize)
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, err
	}
	d, err := bolt.Open(dst, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: false})
	if err != nil {
		return st, err
	}
	defer func() {
		if err != nil {
			_ = d.Close()
			_ = os.Remove(dst)
		}
	}()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if progress == nil {
			return
		}
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if fi, err := os.Stat(dst); err == nil {
					progress(min(fi.Size(), total), total)
				}
			}
		}
	}()
	err = bolt.Compact(d, src, compactTxBytes)
	close(stop)
	<-done
	if err != nil {
		return st, err
	}
	if err = d.Close(); err != nil {
		return st, err
	}
	if err = VerifyFile(dst); err != nil {
		return st, err
	}
	fi, err = os.Stat(dst)
	if err != nil {
		return st, err
	}
	st.After = fi.Size()
	if progress != nil {
		progress(total, total)
	}
	return st, nil
}
