package app

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id (RFC 9106) and kept in the PHC
// string format, $argon2id$v=19$m=…,t=…,p=…$salt$hash, so that a change of
// the parameters leaves old hashes verifiable. The parameters below keep
// one verification under 250 ms on a 2-core machine (docs/people.md has
// the figure and BenchmarkPasswordVerify measures it); at most
// runtime.NumCPU() hashes run at once, so that a burst of sign-ins costs
// time, not memory.

// The argon2id parameters of new hashes.
const (
	argonMemory  = 64 * 1024 // KiB: 64 MiB
	argonTime    = 1
	argonThreads = 2
	argonSaltLen = 16
	argonKeyLen  = 32
)

// Password length rules, in characters (bytes for the upper bound).
const (
	MinPasswordLen = 10
	maxPasswordLen = 1024
)

// checkPassword applies the length rules; field names the form field.
func checkPassword(field, pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLen {
		return invalid(nil, FieldError{Field: field, Message: fmt.Sprintf("must be at least %d characters", MinPasswordLen)})
	}
	if len(pw) > maxPasswordLen {
		return invalid(nil, FieldError{Field: field, Message: fmt.Sprintf("must be at most %d bytes", maxPasswordLen)})
	}
	return nil
}

// hashPassword returns the encoded argon2id hash of pw with a fresh salt.
func (a *App) hashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt)
	a.hashSem <- struct{}{}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	<-a.hashSem
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// verifyPassword reports whether pw matches encoded, in constant time
// over the hash; a malformed encoding matches nothing (after the same
// work, hashed with the default parameters).
func (a *App) verifyPassword(encoded, pw string) bool {
	m, t, p, salt, want, ok := parseArgon(encoded)
	if !ok {
		m, t, p, salt, want = argonMemory, argonTime, argonThreads, make([]byte, argonSaltLen), make([]byte, argonKeyLen)
	}
	a.hashSem <- struct{}{}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	<-a.hashSem
	return subtle.ConstantTimeCompare(got, want) == 1 && ok
}

// parseArgon reads a PHC argon2id string.
func parseArgon(s string) (m, t uint32, p uint8, salt, key []byte, ok bool) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return 0, 0, 0, nil, nil, false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 || m > 1<<20 || t > 16 {
		return 0, 0, 0, nil, nil, false
	}
	b64 := base64.RawStdEncoding
	var err1, err2 error
	salt, err1 = b64.DecodeString(parts[4])
	key, err2 = b64.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) < 16 || len(key) > 64 {
		return 0, 0, 0, nil, nil, false
	}
	return m, t, p, salt, key, true
}
