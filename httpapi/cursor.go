package httpapi

import (
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/dmarcd/dmarcd/store"
)

// reportPagination is the pagination of the report lists (API.md
// "Pagination"): page numbers, and next_cursor, the position after the
// page's last entry (null on the last page). Page is null on a page reached
// by cursor, whose number is not known.
type reportPagination struct {
	Page       *int    `json:"page"`
	Limit      int     `json:"limit"`
	Total      int     `json:"total"`
	TotalPages int     `json:"total_pages"`
	NextCursor *string `json:"next_cursor"`
}

type reportListBody struct {
	Data       any              `json:"data"`
	Pagination reportPagination `json:"pagination"`
}

// cursorPage is a page of a report list: a page number or a cursor.
type cursorPage struct {
	page
	after []byte // nil without cursor
}

// parseCursorPage reads page and limit as parsePage does, and cursor: a
// previous answer's next_cursor, which replaces page (both is 400).
func parseCursorPage(r *request) (cursorPage, error) {
	p, err := parsePage(r)
	if err != nil {
		return cursorPage{}, err
	}
	q := r.URL.Query()
	c := cursorPage{page: p}
	v := q.Get("cursor")
	if v == "" {
		return c, nil
	}
	if q.Get("page") != "" {
		return c, errBadRequest("pass either page or cursor, not both",
			FieldError{Field: "cursor", Message: "cannot be combined with page"})
	}
	if c.after, err = base64.RawURLEncoding.DecodeString(v); err != nil || len(c.after) == 0 {
		return c, errInvalidCursor()
	}
	return c, nil
}

func errInvalidCursor() *Error {
	const msg = "must be the next_cursor of a previous answer of this list"
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: "query parameter cursor " + msg,
		Details: []FieldError{{Field: "cursor", Message: msg}}}
}

// of is the pagination of a page of total entries, next the store's
// position after it (nil on the last page).
func (c cursorPage) of(total int, next []byte) reportPagination {
	p := reportPagination{Limit: c.Limit, Total: total, TotalPages: (total + c.Limit - 1) / c.Limit}
	if c.after == nil {
		p.Page = &c.Page
	}
	if next != nil {
		s := base64.RawURLEncoding.EncodeToString(next)
		p.NextCursor = &s
	}
	return p
}

// reportPageError maps the store's errors of a report list (aggregate or
// failure): an unknown domain_id is 404, a cursor the store cannot
// continue from 400.
func reportPageError(p cursorPage, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errNotFound("domain not found")
	case errors.Is(err, store.ErrInvalid) && p.after != nil:
		return errInvalidCursor()
	}
	return err
}
