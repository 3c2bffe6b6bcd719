// Package dmarc holds the DMARC TXT record (RFC 7489 and RFC 9989), its
// parser and the records dmarcd proposes, and the domain-name helpers
// (normalization, organizational domain) every other package uses: pure,
// a string in, values out, no I/O. The report formats are in the
// sub-packages: container (gzip, zlib, zip, mail and the size limits),
// aggregate (aggregate reports) and arf (failure reports).
package dmarc
