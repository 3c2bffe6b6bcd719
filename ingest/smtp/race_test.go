//go:build race

package smtp

// junkMB is the size of the junk mails of TestSMTPQuarantineCap: smaller
// under the race detector, which makes parsing them 17 times slower.
const junkMB = 1
