// Package container unwraps what reports come in, pure (an io.Reader in,
// payloads out, no other I/O): gzip, zlib and zip, sniffed from their
// bytes, and RFC 5322 mail, whose MIME tree one walker (MIMEWalker) serves
// for every report format (aggregate attachments, failure reports, and
// those to come); all of it read as streams under the size and ratio
// Limits that keep bombs out. The report formats themselves live in the
// sibling packages: aggregate (XML aggregate reports) and arf (failure
// reports).
package container
