package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/dmarcd/dmarcd/store/internal/days"
)

// Kinds of failure, tested with errors.Is. Their text is safe to show a client.
var (
	// ErrNotFound means the entity does not exist or belongs to another organization.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a uniqueness rule would be broken.
	ErrConflict = errors.New("conflict")
	// ErrInvalid means an argument is malformed or out of range.
	ErrInvalid = errors.New("invalid")
	// ErrLimit means a plan or key-count limit has been reached.
	ErrLimit = errors.New("limit exceeded")
	// ErrLocked means another process (or another DB value) holds the file.
	ErrLocked = errors.New("database file is locked by another process")
)

// The failures of a date range, of kind ErrInvalid, to tell apart with
// errors.Is: a range whose start is after its end, and one longer than the
// 366 UTC days a statistics read covers. Their messages name no parameter
// of a front end: a front end that checks its input first says which of
// its own fields is wrong.
var (
	ErrRangeReversed = &Error{Kind: ErrInvalid, Msg: "the range's start is after its end"}
	ErrRangeTooLong  = &Error{Kind: ErrInvalid, Msg: fmt.Sprintf("date range is longer than %d days", maxStatsDays)}
)

// statsDays returns the UTC days of from and to (days since 1970):
// ErrRangeReversed when to's day is before from's, ErrRangeTooLong when
// they span more than maxStatsDays days.
func statsDays(from, to time.Time) (first, last uint32, err error) {
	first, last = days.Of(from), days.Of(to)
	switch {
	case last < first:
		return 0, 0, ErrRangeReversed
	case last-first >= maxStatsDays:
		return 0, 0, ErrRangeTooLong
	}
	return first, last, nil
}

// Error is a failure of a known Kind with a message meant for a client,
// e.g. &Error{ErrNotFound, "domain not found"}.
type Error struct {
	Kind error  // one of ErrNotFound, ErrConflict, ErrInvalid, ErrLimit, ErrLocked
	Msg  string // what a client may be shown
}

// Error returns the client-facing message.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns the Kind, so that errors.Is(err, ErrNotFound) works.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// wrap prefixes an internal failure with the operation. An *Error passes
// unchanged: its Msg is what a client sees and must stay free of internals.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// isKind reports whether err is of the given kind.
func isKind(err, kind error) bool { return err != nil && errors.Is(err, kind) }
