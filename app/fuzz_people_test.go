package app

import (
	"testing"

	"github.com/dmarcd/dmarcd/store"
)

// FuzzParseArgon: no input panics, and what parses has bounded costs.
func FuzzParseArgon(f *testing.F) {
	f.Add("$argon2id$v=19$m=65536,t=1,p=2$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g")
	f.Add("$argon2id$v=19$m=0,t=0,p=0$$")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		m, tm, p, salt, key, ok := parseArgon(s)
		if ok && (m == 0 || m > 1<<20 || tm == 0 || tm > 16 || p == 0 || len(salt) < 8 || len(key) < 16 || len(key) > 64) {
			t.Fatalf("accepted %q: m=%d t=%d p=%d", s, m, tm, p)
		}
	})
}

// FuzzCleanEmail: a cleaned address cleans to itself and is lower case.
func FuzzCleanEmail(f *testing.F) {
	for _, s := range []string{"a@example.com", " A@Example.COM ", "a b@c.d", "<a@b.c>", "\"q\"@x.org", "a@localhost"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := store.CleanEmail(s)
		if err != nil {
			return
		}
		if again, err := store.CleanEmail(c); err != nil || again != c {
			t.Fatalf("%q cleaned to %q, then %q %v", s, c, again, err)
		}
	})
}
