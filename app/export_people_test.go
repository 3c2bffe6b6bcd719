package app

import (
	"strings"
	"time"
)

// TOTPCode is the TOTP code of the base32 secret at t, for the tests.
func TOTPCode(secret string, t time.Time) string {
	key, err := totpEncoding.DecodeString(strings.ToUpper(secret))
	if err != nil {
		panic(err)
	}
	return hotp(key, uint64(t.Unix()/totpStep), totpDigits)
}
