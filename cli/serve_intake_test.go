package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeIntakeFlags ensures bad SMTP, TLS and geolocation settings stop
// serve before it starts, with the flag or file named: usage errors exit
// 2, unreadable files 1.
func TestServeIntakeFlags(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join("..", "testdata", "geo", "broken", "cyclic-data-structure.mmdb")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--smtp-tls-cert", "cert.pem"}, 2, "--smtp-tls-key"},
		{[]string{"--smtp-max-conns", "0"}, 2, "--smtp-max-conns"},
		{[]string{"--smtp-max-bytes", "-1"}, 2, "--smtp-max-bytes"},
		{[]string{"--smtp-read-timeout", "0s"}, 2, "--smtp-read-timeout"},
		{[]string{"--smtp-tls-cert", filepath.Join(dir, "none.pem"), "--smtp-tls-key", filepath.Join(dir, "none.key")}, 1, "none.pem"},
		{[]string{"--geoip-city", broken}, 1, "cyclic-data-structure.mmdb"},
		{[]string{"--geoip-asn", filepath.Join(dir, "missing.mmdb")}, 1, "missing.mmdb"},
	} {
		args := append([]string{"serve", "--data-dir", dir, "--reporting-domain", "reports.test", "--listen", "127.0.0.1:0"}, c.args...)
		code, _, errOut := run(t, nil, args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("serve %s: exit %d, stderr %q; want exit %d mentioning %s", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
}
