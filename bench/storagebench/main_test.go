package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAllocated ensures the data folder is measured as du does: blocks
// the file system allocated, not apparent sizes (a bbolt file grows
// sparse), summed over the files under it.
func TestAllocated(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "full"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "sub", "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := allocated(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got < 1<<20 || got > 2<<20 {
		t.Errorf("allocated %d bytes, want about 1 MiB (a full 1 MiB file and a sparse 1 GiB one)", got)
	}
}

// TestPeakRSS reads this process's VmHWM.
func TestPeakRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	if got := peakRSS(os.Getpid()); got < 1<<20 {
		t.Errorf("peak RSS %d bytes", got)
	}
	if got := peakRSS(-1); got != 0 {
		t.Errorf("peak RSS of no process: %d", got)
	}
}

func TestParseShape(t *testing.T) {
	for s, want := range map[string][2]int{"2000x50": {2000, 50}, " 1x1000000": {1, 1000000}} {
		if n, m, ok := parseShape(s); !ok || n != want[0] || m != want[1] {
			t.Errorf("%q: %d %d %v", s, n, m, ok)
		}
	}
	for _, s := range []string{"", "2000", "x5", "0x5", "5x-1"} {
		if _, _, ok := parseShape(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}
