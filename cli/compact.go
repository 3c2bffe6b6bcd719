package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dmarcd/dmarcd/admin"
	"github.com/dmarcd/dmarcd/store"
)

func newCompactCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Give the space of deleted data back to the file system (the server must be stopped)",
		Long: `Rewrite <data-dir>/dmarcd.db without its free pages. The database file never
shrinks by itself: after retention deleted a year of reports, or a large
domain was deleted, it stays at its largest size. compact copies every
record into a fresh file (bbolt's compaction), checks the copy, and puts it
in place of the old file, which is untouched until then. It needs the
server stopped (it refuses while one runs) and free disk space for the
copy, about the size of the data. On a terminal it shows a progress bar.

'dmarcd backup' always writes a compacted copy, also while serving.`,
		Example: `  systemctl stop dmarcd
  dmarcd compact --data-dir /var/lib/dmarcd
  systemctl start dmarcd`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCompact(cmd.Context(), g)
		},
	}
}

func runCompact(ctx context.Context, g *globalOptions) error {
	if c, err := admin.Dial(ctx, g.socketPath()); err == nil {
		c.Close()
		return fmt.Errorf("a dmarcd server is running on %s: stop it before compacting (or take a compacted copy with 'dmarcd backup FILE')", g.DataDir)
	}
	if err := g.requireDatabase(); err != nil {
		return err
	}
	bar := newProgressBar(g.stdout, "compacting", !g.JSON)
	st, err := store.CompactFile(g.dbPath(), time.Second, bar.update)
	bar.finish(err == nil)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%s is in use by another process (is a server running?): stop it first", g.dbPath())
	}
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, map[string]any{"file": g.dbPath(), "bytes_before": st.Before, "bytes_after": st.After,
			"seconds": st.Took.Seconds()})
	}
	fmt.Fprintf(g.stdout, "Compacted %s from %s to %s in %s.\n", g.dbPath(), humanBytes(st.Before), humanBytes(st.After),
		st.Took.Round(time.Millisecond))
	return nil
}

// progressBar draws "what [=====     ]  42%" in place on a terminal, at
// most ten times a second; elsewhere it draws nothing.
type progressBar struct {
	w     io.Writer
	what  string
	on    bool
	drawn time.Time
	shown bool
}

func newProgressBar(w io.Writer, what string, enabled bool) *progressBar {
	return &progressBar{w: w, what: what, on: enabled && isTerminal(w)}
}

func (p *progressBar) update(done, total int64) {
	if !p.on || total <= 0 {
		return
	}
	if now := time.Now(); now.Sub(p.drawn) >= 100*time.Millisecond || done >= total {
		p.drawn = now
		p.shown = true
		const width = 30
		frac := min(float64(done)/float64(total), 1)
		n := int(frac * width)
		fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %s of about %s\x1b[K", p.what, strings.Repeat("=", n), strings.Repeat(" ", width-n),
			frac*100, humanBytes(done), humanBytes(total))
	}
}

func (p *progressBar) finish(ok bool) {
	if p.shown {
		fmt.Fprintln(p.w)
	}
}

// humanBytes writes n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMG"[i])
}

// compactCheckedTo compacts the raw database copy at raw into a checked
// file that replaces dst (see writeChecked), and removes raw.
func compactCheckedTo(raw, dst string, progress func(done, total int64)) (store.CompactStats, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".compact-*")
	if err != nil {
		return store.CompactStats{}, fmt.Errorf("backup: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	st, err := store.CompactCopy(raw, tmp.Name(), progress)
	if err != nil {
		return st, fmt.Errorf("backup: compacting the copy, %s left unchanged: %w", dst, err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	return st, nil
}
