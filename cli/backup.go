package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/internal/buildinfo"
	"github.com/dmarcd/dmarcd/internal/secret"
	"github.com/dmarcd/dmarcd/store"
)

func newBackupCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the database to FILE, also while serving",
		Long: `Write a consistent copy of the whole database (organizations, keys,
domains, reports) to FILE. While 'dmarcd serve' runs, the copy is taken
through its admin socket without stopping it (a read transaction: intake
and the API go on). The copy is compacted (free pages left out: it is as
large as the data, not as the database file at its largest) and checked
before it replaces FILE, so FILE is either the old file or a complete new
backup. The API keys in it are hashes: a backup leaks no usable key, but
keep it private all the same.

Mailbox passwords and OAuth2 secrets (dmarcd mailbox) are in the backup
encrypted with the key <data-dir>/secret.key, which is not in it: keep a
copy of secret.key too (preferably apart from the backups). Without it, a
restored database's mailboxes report that their credentials cannot be
read, and must have them entered again.`,
		Example: `  dmarcd backup /var/backups/dmarcd-$(date +%F).db
  dmarcd restore /var/backups/dmarcd-2026-11-20.db   # with the server stopped`,
		Args: exactArgs(1, "the FILE to write"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBackup(cmd.Context(), g, args[0])
		},
	}
}

func runBackup(ctx context.Context, g *globalOptions, dst string) error {
	if err := checkBackupTarget(dst); err != nil {
		return err
	}
	var svc admin.Service
	if c, ok, err := g.dialAdmin(ctx); err != nil {
		return err
	} else if ok {
		defer c.Close()
		svc = c
	} else {
		if err := g.requireDatabase(); err != nil {
			return err
		}
		db, err := g.openStore(true)
		if err != nil {
			return err
		}
		defer db.Close()
		svc = &admin.Local{DB: db}
	}
	// The copy is taken raw (a read transaction, short for the server),
	// then compacted here: a backup is as large as the data, not as the
	// file at its peak.
	raw := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".raw")
	defer os.Remove(raw)
	n, err := writeChecked(raw, func(w io.Writer) (int64, error) { return svc.Backup(ctx, w) })
	if err != nil {
		return err
	}
	bar := newProgressBar(g.stdout, "compacting the copy", !g.JSON)
	st, err := compactCheckedTo(raw, dst, bar.update)
	bar.finish(err == nil)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"file": dst, "bytes": st.After, "bytes_uncompacted": n})
	}
	fmt.Fprintf(g.stdout, "Backed up %d bytes to %s (compacted from %d).\n", st.After, dst, n)
	if key := secret.KeyPath(g.DataDir); fileExists(key) {
		fmt.Fprintf(g.stdout, "Mailbox credentials in it are encrypted with %s, which is not in the backup: keep a copy of that file as well.\n", key)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkBackupTarget says what to do when dst cannot take a backup: its
// folder is missing or no folder, or dst itself is a folder.
func checkBackupTarget(dst string) error {
	dir := filepath.Dir(dst)
	if fi, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup: the folder %s does not exist: create it first (mkdir -p %s) or write to another FILE", dir, shellQuote(dir))
	} else if err == nil && !fi.IsDir() {
		return fmt.Errorf("backup: %s is no folder: write to a FILE in an existing folder", dir)
	}
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		return fmt.Errorf("backup: %s is a folder: give a file name, e.g. %s", dst, filepath.Join(dst, "dmarcd-backup.db"))
	}
	return nil
}

// writeChecked writes through fill into a temporary file beside dst, syncs
// it, verifies it is a sound dmarcd database, and only then renames it over
// dst.
func writeChecked(dst string, fill func(io.Writer) (int64, error)) (int64, error) {
	if err := checkBackupTarget(dst); err != nil {
		return 0, err
	}
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := fill(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if err := store.VerifyFile(tmp.Name()); err != nil {
		return 0, fmt.Errorf("backup: the copy failed its check, %s left unchanged: %w", dst, err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	return n, nil
}

func newRestoreCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the database with a backup (the server must be stopped)",
		Long: `Replace <data-dir>/dmarcd.db with the backup FILE. Stop 'dmarcd serve' first:
restore refuses to run while a server holds the data directory. FILE is
checked (a dmarcd database of this or an older version, consistent pages)
before anything is replaced; the database it replaces is kept beside it
as dmarcd.db.before-restore-<time>, so a restore can be undone. The next
'dmarcd serve' migrates an older backup to the current schema.`,
		Example: `  systemctl stop dmarcd
  dmarcd restore --data-dir /var/lib/dmarcd /var/backups/dmarcd-2026-11-20.db
  systemctl start dmarcd`,
		Args: exactArgs(1, "the backup FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRestore(cmd.Context(), g, args[0])
		},
	}
}

func runRestore(ctx context.Context, g *globalOptions, src string) error {
	if c, ok, err := g.dialAdmin(ctx); err != nil {
		return err
	} else if ok {
		c.Close()
		return fmt.Errorf("a dmarcd server is running on %s: stop it before restoring (systemctl stop dmarcd)", g.DataDir)
	}
	if fi, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore: no such file: %s (give the path of a file written by 'dmarcd backup')", src)
	} else if err == nil && fi.IsDir() {
		return fmt.Errorf("restore: %s is a folder: give the backup file in it (written by 'dmarcd backup')", src)
	}
	if err := store.VerifyFile(src); err != nil {
		return fmt.Errorf("restore: %s is not a usable backup: %w", src, err)
	}
	if err := os.MkdirAll(g.DataDir, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	// Hold the lock of the current database while it is swapped, so that a
	// server cannot start on it halfway.
	var current *store.DB
	if _, err := os.Stat(g.dbPath()); err == nil {
		db, err := store.Open(g.dbPath(), &store.Options{Timeout: time.Second})
		if errors.Is(err, store.ErrLocked) {
			return fmt.Errorf("restore: %s is in use by another process (is a server running?): stop it first", g.dbPath())
		}
		if err != nil {
			return fmt.Errorf("restore: opening the current database: %w", err)
		}
		current = db
		defer current.Close()
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer in.Close()
	staged := g.dbPath() + ".restoring"
	n, err := writeChecked(staged, func(w io.Writer) (int64, error) { return io.Copy(w, in) })
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	kept := ""
	if current != nil {
		kept = fmt.Sprintf("%s.before-restore-%s", g.dbPath(), time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(g.dbPath(), kept); err != nil {
			os.Remove(staged)
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := os.Rename(staged, g.dbPath()); err != nil {
		return fmt.Errorf("restore: %w (the previous database is at %s)", err, kept)
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"restored_from": src, "bytes": n, "previous": kept})
	}
	fmt.Fprintf(g.stdout, "Restored %s (%d bytes) into %s.\n", src, n, g.dbPath())
	if kept != "" {
		fmt.Fprintf(g.stdout, "The previous database is kept as %s.\n", kept)
	}
	return nil
}

func newVersionCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the database schema version",
		Long: `Print the version of this binary, the VCS revision and commit time it was
built from (stamped by 'go build' in a git checkout; not by 'go run'), and
the database schema version it writes. A database of an older schema is migrated when 'dmarcd serve'
opens it; one of a newer schema is refused (upgrade the binary instead).`,
		Example: "  dmarcd version\n  dmarcd version --json",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(*cobra.Command, []string) error {
			in := buildinfo.Read(Version)
			if g.JSON {
				return printJSON(g.stdout, struct {
					buildinfo.Info
					SchemaVersion int `json:"schema_version"`
				}{in, store.SchemaVersion})
			}
			fmt.Fprintf(g.stdout, "dmarcd %s\ndatabase schema %d\n", in, store.SchemaVersion)
			return nil
		},
	}
}
