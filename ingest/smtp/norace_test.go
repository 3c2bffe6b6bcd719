//go:build !race

package smtp

// junkMB is the size of the junk mails of TestSMTPQuarantineCap.
const junkMB = 10
