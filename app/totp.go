package app

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"net/url"
	"strings"
	"time"
)

// TOTP (RFC 6238 over RFC 4226's HOTP): HMAC-SHA1, 30-second steps, 6
// digits, the code of the step before and after accepted too (clock
// drift), no code accepted twice (the last step used is stored). It is
// the 30 lines below rather than a library: the algorithm is small and
// fixed, and the RFC's test vectors check it (totp_test.go).

const (
	totpStep   = 30 // seconds
	totpDigits = 6
	totpSkew   = 1 // steps either side
)

// totpEncoding is base32 without padding, as authenticator apps take it.
var totpEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// hotp is RFC 4226's HOTP value of key at counter, digits long.
func hotp(key []byte, counter uint64, digits int) string {
	mac := hmac.New(sha1.New, key)
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], counter)
	mac.Write(msg[:])
	sum := mac.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	mod := uint32(1)
	for range digits {
		mod *= 10
	}
	s := make([]byte, digits)
	v %= mod
	for i := digits - 1; i >= 0; i-- {
		s[i] = byte('0' + v%10)
		v /= 10
	}
	return string(s)
}

// totpCheck returns the step at which code is valid for the base32
// secret at now, within the skew and after lastStep, or -1.
func totpCheck(secret, code string, now time.Time, lastStep int64) int64 {
	key, err := totpEncoding.DecodeString(strings.ToUpper(secret))
	code = strings.ReplaceAll(strings.TrimSpace(code), " ", "")
	if err != nil || len(code) != totpDigits {
		return -1
	}
	step := now.Unix() / totpStep
	found := int64(-1)
	for s := step - totpSkew; s <= step+totpSkew; s++ {
		if s <= lastStep || s < 0 {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(hotp(key, uint64(s), totpDigits)), []byte(code)) == 1 && found < 0 {
			found = s
		}
	}
	return found
}

// newTOTPSecret is 20 random bytes (RFC 4226's recommended length),
// base32.
func newTOTPSecret() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	return totpEncoding.EncodeToString(b[:])
}

// otpauthURL is the key URI authenticator apps read (as a QR code).
func otpauthURL(email, secret string) string {
	q := url.Values{"secret": {secret}, "issuer": {"dmarcd"}, "algorithm": {"SHA1"},
		"digits": {"6"}, "period": {"30"}}
	return "otpauth://totp/" + url.PathEscape("dmarcd:"+email) + "?" + q.Encode()
}

// newRecoveryCodes returns n codes (xxxxx-xxxxx, base32 lowercase, 50
// bits each) and their stored hashes.
func newRecoveryCodes(n int) (codes, hashes []string) {
	for range n {
		var b [7]byte
		_, _ = rand.Read(b[:])
		s := strings.ToLower(totpEncoding.EncodeToString(b[:]))[:10]
		code := s[:5] + "-" + s[5:]
		codes = append(codes, code)
		hashes = append(hashes, recoveryHash(code))
	}
	return codes, hashes
}

// recoveryHash is the stored form of a recovery code: SHA-256 of its
// normalized text (lowercase, no dash or space), hex. The codes are
// random (50 bits), so a fast hash is enough.
func recoveryHash(code string) string {
	c := strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(code)))
	sum := sha256.Sum256([]byte(c))
	return hex.EncodeToString(sum[:])
}

// isRecoveryCode reports whether code has a recovery code's shape (and
// not a TOTP's).
func isRecoveryCode(code string) bool {
	c := strings.NewReplacer("-", "", " ", "").Replace(strings.TrimSpace(code))
	return len(c) == 10
}
