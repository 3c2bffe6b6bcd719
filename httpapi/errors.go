package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/dmarcd/dmarcd/dnscheck"
	"github.com/dmarcd/dmarcd/store"
	"github.com/dmarcd/dmarcd/webhook"
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

func errValidation(field, msg string) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Code: "validation_failed",
		Message: "invalid " + field + ": " + msg, Details: []FieldError{{Field: field, Message: msg}}}
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

// errPlanFeature is the 403 of an endpoint the organization's plan does not
// include (failure reports, webhooks); what names the feature.
func errPlanFeature(what string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "plan_feature_unavailable",
		Message: "your plan does not include " + what}
}

var (
	errUnauthorized = &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
		Message: "missing or invalid API key: send a valid key in the X-API-Key header"}
	errInsufficientScope = &Error{Status: http.StatusForbidden, Code: "insufficient_scope",
		Message: "this API key has read scope and cannot change anything; use a key with full scope"}
	errRateLimited = &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "rate limit exceeded; retry after the number of seconds in the Retry-After header"}
	errAuthBlocked = &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "too many failed authentications from this address; retry after the number of seconds in the Retry-After header"}
	errRevokedBlocked = &Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "too many failed authentications with this key; retry after the number of seconds in the Retry-After header"}
)

// apiError turns any error into the Error the client sees. Kinds from the
// packages below are mapped here and nowhere else; anything unknown is a 500
// whose cause stays in the log.
func apiError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ve *dnscheck.VerifyError
	if errors.As(err, &ve) {
		return &Error{Status: http.StatusUnprocessableEntity, Code: "verification_failed", Message: ve.Reason}
	}
	// A webhook URL refused by package webhook's rules; a host that could
	// not be resolved for a temporary reason is a 503 below instead.
	var ue *webhook.URLError
	if errors.As(err, &ue) && !errors.Is(err, dnscheck.ErrTemporary) {
		return errValidation("url", ue.Reason)
	}
	var se *store.Error
	msg := "request failed"
	if errors.As(err, &se) {
		msg = se.Msg
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: msg}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: msg}
	case errors.Is(err, store.ErrLimit):
		return &Error{Status: http.StatusForbidden, Code: "plan_limit_exceeded", Message: msg}
	case errors.Is(err, store.ErrInvalid):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "validation_failed", Message: msg}
	case errors.Is(err, dnscheck.ErrTemporary):
		return &Error{Status: http.StatusServiceUnavailable, Code: "dns_unavailable",
			Message: "DNS lookups failed or timed out; try again later", Cause: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Cause: err}
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
