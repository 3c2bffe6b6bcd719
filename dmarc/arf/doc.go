// Package arf reads DMARC failure reports (RUF): RFC 6591 / RFC 9991
// authentication failure reports in ARF (RFC 5965) mail, and the
// plain-text failure notices some gateways send instead. It is pure (an
// io.Reader in, values out, no other I/O), walks the mail with
// container.MIMEWalker, and keeps of the message a report is about only
// its header, never its body.
package arf
