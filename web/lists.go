package web

import "github.com/dmarcd/dmarcd/senders"

// Helpers of the list pages' filters and pagers (issue 24).

// ranked is p for a list ordered by a measure (messages, a name), not by
// time: its links say Previous and Next rather than Newer and Older.
func (p pager) ranked() pager {
	p.PrevLabel, p.NextLabel = "Previous", "Next"
	return p
}

// failingSources keeps the sources some of whose mail failed DMARC, in
// their order.
func failingSources(rows []*senders.Source) []*senders.Source {
	var out []*senders.Source
	for _, s := range rows {
		if s.DMARCPass < s.Messages {
			out = append(out, s)
		}
	}
	return out
}

// sortedBy reports whether the overview's sort parameter orders its
// domains by a measure (sortRows), not newest first.
func sortedBy(sort string) bool {
	switch sort {
	case "name", "messages", "pass", "alerts":
		return true
	}
	return false
}
