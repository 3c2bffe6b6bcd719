// Package dmarc holds the formats of DMARC, pure (an io.Reader or a string
// in, values out, no other I/O): the DMARC TXT record (RFC 7489 and RFC 9989)
// and domain names, and aggregate reports (RFC 7489 and RFC 9990) in their
// XML, gzip, zlib, zip and mail containers, read as streams under size
// limits.
package dmarc
