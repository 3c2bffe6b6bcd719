package httpapi

import (
	"fmt"
	"net/http"
	"time"
)

const (
	// defaultStatsDays is the range of a domain's statistics when the
	// request names none: the last 30 UTC days, today included.
	defaultStatsDays = 30
	// maxStatsDays is the longest range served (the roll-ups of a leap year).
	maxStatsDays = 366
)

const day = 24 * time.Hour

// reportStatistics answers the summary computed at ingest: no record is read.
func (s *Server) reportStatistics(w http.ResponseWriter, r *request) error {
	st, err := s.store.ReportStatistics(r.orgID(), r.params.ByName("id"))
	return writeFound(w, st, err, "report not found")
}

// domainStatistics answers a domain's statistics over a range of UTC days,
// from its daily roll-ups.
func (s *Server) domainStatistics(w http.ResponseWriter, r *request) error {
	from, to, err := statsRange(r, s.now())
	if err != nil {
		return err
	}
	st, err := s.store.DomainStatistics(r.orgID(), r.params.ByName("id"), from, to)
	return writeFound(w, st, err, "domain not found")
}

// statsRange reads date_from and date_to (Unix seconds). Without date_to the
// range ends now; without date_from it spans defaultStatsDays days up to
// date_to. Both count by whole UTC days, and at most maxStatsDays of them.
func statsRange(r *request, now time.Time) (from, to time.Time, err error) {
	q := r.URL.Query()
	f, err := unixParam(q, "date_from")
	if err != nil {
		return from, to, err
	}
	t, err := unixParam(q, "date_to")
	if err != nil {
		return from, to, err
	}
	to = now.UTC()
	if t != nil {
		to = *t
	}
	from = to.Truncate(day).Add(-(defaultStatsDays - 1) * day)
	if from.Unix() < 0 {
		from = time.Unix(0, 0).UTC() // there are no reports before 1970
	}
	if f != nil {
		from = *f
	}
	if to.Before(from) {
		if t == nil {
			return from, to, errBadRequest("date_from must not be in the future",
				FieldError{Field: "date_from", Message: "must not be after date_to, which defaults to now"})
		}
		return from, to, errBadRange()
	}
	if days := int(to.Truncate(day).Sub(from.Truncate(day))/day) + 1; days > maxStatsDays {
		msg := fmt.Sprintf("the range spans %d days; at most %d are served", days, maxStatsDays)
		return from, to, errBadRequest(msg, FieldError{Field: "date_from", Message: msg})
	}
	return from, to, nil
}
