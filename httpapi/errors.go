package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/dmarcd/dmarcd/app"
	"github.com/dmarcd/dmarcd/store"
)

// Error is an error with the status, code and message a client sees. Cause,
// when set, is logged but never shown.
type Error struct {
	Status  int
	Code    string
	Message string
	Details []FieldError
	Cause   error
}

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

// The error codes of API.md, one constructor each so handlers read plainly.

func errBadRequest(msg string, details ...FieldError) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Message: msg, Details: details}
}

// writeFound answers v with 200, or 404 with notFound when err is
// store.ErrNotFound, or err: the end of every handler that reads one thing.
func writeFound(w http.ResponseWriter, v any, err error, notFound string) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound(notFound)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func errNotFound(msg string) *Error {
	return &Error{Status: http.StatusNotFound, Code: "not_found", Message: msg}
}

var (
	errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
		Message: "missing or invalid API key: send a valid key in the X-API-Key header"}
	errRateLimited = &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "rate limit exceeded; retry after the number of seconds in the Retry-After header"}
)

// codes are the status and API.md code of each kind of the application
// layer's errors.
var codes = map[app.Kind]struct {
	status int
	code   string
}{
	app.Invalid:        {http.StatusUnprocessableEntity, "validation_failed"},
	app.NotFound:       {http.StatusNotFound, "not_found"},
	app.Conflict:       {http.StatusConflict, "conflict"},
	app.Forbidden:      {http.StatusForbidden, "insufficient_scope"},
	app.PlanFeature:    {http.StatusForbidden, "plan_feature_unavailable"},
	app.PlanLimit:      {http.StatusForbidden, "plan_limit_exceeded"},
	app.KeyLimit:       {http.StatusForbidden, "key_limit_exceeded"},
	app.Unverified:     {http.StatusUnprocessableEntity, "verification_failed"},
	app.Unreachable:    {http.StatusUnprocessableEntity, "mailbox_unreachable"},
	app.DNSUnavailable: {http.StatusServiceUnavailable, "dns_unavailable"},
	app.NoSecretKey:    {http.StatusServiceUnavailable, "secret_key_unavailable"},
}

// apiError turns any error into the Error the client sees: the kinds of
// the application layer (app.AsError) are mapped here and nowhere else;
// anything unknown is a 500 whose cause stays in the log.
func apiError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	// A date range the store refused: the API names its own parameters.
	if errors.Is(err, store.ErrRangeReversed) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "validation_failed", Message: "date_to is before date_from"}
	}
	ae := app.AsError(err)
	switch ae.Kind {
	case app.Unauthenticated:
		return errUnauthorized
	case app.Throttled:
		// From this address, or with this (revoked) key.
		return &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: ae.Msg + "; retry after the number of seconds in the Retry-After header"}
	}
	c, ok := codes[ae.Kind]
	if !ok {
		return &Error{Status: http.StatusInternalServerError, Code: "internal", Cause: err}
	}
	e := &Error{Status: c.status, Code: c.code, Message: ae.Msg}
	for _, f := range ae.Fields {
		e.Details = append(e.Details, FieldError{Field: f.Field, Message: f.Message})
	}
	if c.status >= 500 {
		e.Cause = err
	}
	return e
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Details []FieldError `json:"details"`
}

// writeError writes err as the API.md error body. A 500's message carries
// only the request id; its cause is logged.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := apiError(err)
	rid := w.Header().Get("X-Request-Id")
	msg := e.Message
	if e.Status >= 500 {
		level := slog.LevelError
		if e.Status == http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(r.Context(), level, "request failed",
			slog.String("request_id", rid), slog.String("path", r.URL.Path), slog.Any("error", err))
		if e.Status == http.StatusInternalServerError {
			msg = fmt.Sprintf("internal error (request id %s)", rid)
		}
	}
	details := e.Details
	if details == nil {
		details = []FieldError{}
	}
	writeJSON(w, e.Status, errorBody{errorObject{Code: e.Code, Message: msg, Details: details}})
}
