package dnscheck

import "strings"

// UnescapeTXT turns one TXT character-string as miekg/dns unpacks it into
// the octets published: miekg/dns keeps TXT data in zone-file form, where a
// quote or backslash is preceded by a backslash and an octet outside
// printable ASCII is \DDD (decimal). Records are shown, parsed and compared
// as published, so a quote in a record reads as a quote, not as \".
// A backslash that escapes nothing (the end of the string) is kept.
func UnescapeTXT(s string) string {
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		if i+2 < len(s) && isDigit(s[i]) && isDigit(s[i+1]) && isDigit(s[i+2]) {
			if n := int(s[i]-'0')*100 + int(s[i+1]-'0')*10 + int(s[i+2]-'0'); n <= 255 {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
