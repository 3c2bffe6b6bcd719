// Package mailtest builds the MIME pieces tests of report mail put
// together: multipart bodies and base64 in mail-sized lines.
package mailtest

import (
	"encoding/base64"
	"strings"
)

// Multipart builds a multipart body with boundary b from raw parts (each
// its headers, a blank line and its body), with a preamble and the final
// boundary, CR LF line ends.
func Multipart(b string, parts ...string) string {
	var s strings.Builder
	s.WriteString("This is a multi-part message in MIME format.\r\n")
	for _, p := range parts {
		s.WriteString("--" + b + "\r\n" + p + "\r\n")
	}
	s.WriteString("--" + b + "--\r\n")
	return s.String()
}

// Base64 encodes b in 76-character lines, each ended by CR LF.
func Base64(b []byte) string {
	s := base64.StdEncoding.EncodeToString(b)
	var out strings.Builder
	for len(s) > 76 {
		out.WriteString(s[:76] + "\r\n")
		s = s[76:]
	}
	out.WriteString(s + "\r\n")
	return out.String()
}
