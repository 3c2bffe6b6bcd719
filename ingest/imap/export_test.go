package imap

import "github.com/emersion/go-imap/v2"

// FlagsForTest returns the flags of every message in folder, read-only.
func FlagsForTest(c *Conn, folder string) [][]imap.Flag {
	c.deadline(c.opts.timeout())
	if _, err := c.c.Select(folder, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		return nil
	}
	msgs, err := c.c.Fetch(imap.SeqSetNum(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), &imap.FetchOptions{Flags: true}).Collect()
	if err != nil {
		return nil
	}
	var out [][]imap.Flag
	for _, m := range msgs {
		out = append(out, m.Flags)
	}
	return out
}
