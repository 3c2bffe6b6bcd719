// Package dmarc holds the formats of DMARC, pure (an io.Reader or a string
// in, values out, no other I/O): the DMARC TXT record (RFC 7489 and RFC 9989)
// and domain names; aggregate reports (RFC 7489 and RFC 9990) in their XML,
// gzip, zlib, zip and mail containers, read as streams under size limits;
// and failure reports (RFC 6591 / RFC 9991 ARF, and the plain-text notices
// some gateways send), of which only the original message's headers are
// kept, never its body.
package dmarc
