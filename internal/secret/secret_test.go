package secret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateMakesPrivateKeyOnce(t *testing.T) {
	path := KeyPath(t.TempDir())
	b1, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %#o, want 0600", fi.Mode().Perm())
	}
	sealed := b1.Seal([]byte("hunter2"), "ctx")
	b2, err := LoadOrCreate(path) // must read the same key, not make a new one
	if err != nil {
		t.Fatal(err)
	}
	got, err := b2.Open(sealed, "ctx")
	if err != nil || string(got) != "hunter2" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("sealed value holds the plaintext")
	}
}

func TestMissingKeyIsClear(t *testing.T) {
	_, err := Load(KeyPath(t.TempDir()))
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), FileName) {
		t.Fatalf("err = %v, want ErrNoKey naming the file", err)
	}
}

func TestWrongKeyAndDamageAreErrors(t *testing.T) {
	a, err := LoadOrCreate(KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreate(KeyPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	sealed := a.Seal([]byte("s3cret"), "ctx")
	if _, err := b.Open(sealed, "ctx"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("other key: err = %v, want ErrWrongKey", err)
	}
	if _, err := a.Open(sealed, "other"); !errors.Is(err, ErrDamaged) {
		t.Fatalf("other context: err = %v, want ErrDamaged", err)
	}
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	if _, err := a.Open(flipped, "ctx"); !errors.Is(err, ErrDamaged) {
		t.Fatalf("flipped bit: err = %v, want ErrDamaged", err)
	}
	for _, bad := range [][]byte{nil, []byte("plain text password"), sealed[:10]} {
		if _, err := a.Open(bad, "ctx"); !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open(%q): err = %v, want ErrDamaged", bad, err)
		}
	}
}

func TestBadKeyFiles(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		data string
		mode os.FileMode
		want string
	}{
		"short":    {"abcd\n", 0o600, "does not hold a key"},
		"not hex":  {strings.Repeat("zz", 32), 0o600, "does not hold a key"},
		"readable": {strings.Repeat("ab", 32), 0o644, "chmod 600"},
	}
	for name, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		if err := os.WriteFile(path, []byte(c.data), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

func FuzzOpen(f *testing.F) {
	b, err := newBox(bytes.Repeat([]byte{7}, keyLen), "test")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b.Seal([]byte("x"), "ctx"))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		plain, err := b.Open(in, "ctx")
		if err == nil && string(plain) != "x" {
			// Only the value sealed by b opens; the fuzzer forges none.
			t.Fatalf("opened a forged value: %q", plain)
		}
	})
}
