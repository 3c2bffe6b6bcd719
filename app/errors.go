package app

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/dmarcd/dmarcd/dnscheck"
	imapin "github.com/dmarcd/dmarcd/ingest/imap"
	"github.com/dmarcd/dmarcd/internal/egress"
	"github.com/dmarcd/dmarcd/store"
)

// Kind is what went wrong, for a front end to choose its answer: each
// front end maps every kind once (httpapi to a status and an API.md code,
// web to a page, admin to the store's kinds on its socket).
type Kind int

// The kinds of failure. Their order means nothing.
const (
	// Internal is anything else: a bug or a failure of the machine. Its
	// cause is for the log, never for the person who asked.
	Internal Kind = iota
	// Invalid is a field sent wrong; Fields names each.
	Invalid
	// NotFound is no such thing in the actor's organization: another
	// organization's is not found either, so ids leak nothing.
	NotFound
	// Conflict breaks a uniqueness rule.
	Conflict
	// Forbidden is an action the actor may not run (a read-only key).
	Forbidden
	// PlanFeature is a feature the organization's plan lacks; Feature
	// says which.
	PlanFeature
	// PlanLimit is a count the plan allows reached (domains, webhooks).
	PlanLimit
	// KeyLimit is the most active API keys an organization may hold.
	KeyLimit
	// Unverified is a domain whose DNS does not show the record (verify).
	Unverified
	// Unreachable is a mailbox whose server refused the connection or
	// login tried before saving; Msg is the server's words.
	Unreachable
	// DNSUnavailable is DNS that failed or timed out: try again later.
	DNSUnavailable
	// NoSecretKey is a server without the key that seals mailbox
	// credentials.
	NoSecretKey
	// Unauthenticated is no valid key or session.
	Unauthenticated
	// Throttled is a client address (or a revoked key, KeyID) over its
	// failed-authentication limit; RetryAfter says for how long.
	Throttled
	// TOTPRequired is a right password of an account with a second factor
	// and no code given: ask for the code (or a recovery code).
	TOTPRequired
)

var kindNames = [...]string{Internal: "internal", Invalid: "invalid", NotFound: "not found", Conflict: "conflict",
	Forbidden: "forbidden", PlanFeature: "plan feature", PlanLimit: "plan limit", KeyLimit: "key limit",
	Unverified: "unverified", Unreachable: "unreachable", DNSUnavailable: "DNS unavailable",
	NoSecretKey: "no secret key", Unauthenticated: "unauthenticated", Throttled: "throttled",
	TOTPRequired: "TOTP required"}

// String names the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind " + strconv.Itoa(int(k))
}

// Error is a failure of the application layer: its Kind, what a person
// may read, and the cause for the log.
type Error struct {
	Kind       Kind
	Msg        string        // what the person who asked may read
	Fields     []FieldError  // Invalid: every field sent wrong
	Feature    Feature       // PlanFeature: the feature missing
	RetryAfter time.Duration // Throttled: how long the address (or revoked key) stays refused
	// KeyID is, for Unauthenticated or Throttled, the id of the revoked
	// key presented, for the log (never the key itself); "" for others.
	KeyID string
	Err   error // the cause, logged and never shown
}

// FieldError names one invalid field and what is wrong with it.
type FieldError struct {
	Field   string
	Message string
}

// Error returns the message; a mailbox that could not be reached says so
// in front of the server's words.
func (e *Error) Error() string {
	switch {
	case e.Kind == Unreachable:
		return "mailbox unreachable: " + e.Msg
	case e.Msg == "" && e.Err != nil:
		return e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// invalid is one Invalid error naming every field in fields, its message
// "invalid F: M" for each, joined by "; ".
func invalid(cause error, fields ...FieldError) *Error {
	msgs := make([]string, len(fields))
	for i, f := range fields {
		msgs[i] = "invalid " + f.Field + ": " + f.Message
	}
	return &Error{Kind: Invalid, Msg: strings.Join(msgs, "; "), Fields: fields, Err: cause}
}

// notFound gives a store ErrNotFound the message of the thing not found,
// and passes any other error on.
func notFound(err error, what string) error {
	if errors.Is(err, store.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: what + " not found", Err: err}
	}
	return err
}

// errDNSUnavailable is the message of a DNS that could not answer.
const errDNSUnavailable = "DNS lookups failed or timed out; try again later"

// AsError returns err as an *Error: err itself when it is one, else the
// kind of the store, DNS, webhook-address or mailbox error it wraps, else
// Internal with err as the cause. Front ends call it once, where they
// answer.
func AsError(err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if ve, ok := errors.AsType[*dnscheck.VerifyError](err); ok {
		return &Error{Kind: Unverified, Msg: ve.Reason, Err: err}
	}
	// A webhook URL refused by package egress's rules; a host that could
	// not be resolved for a temporary reason is DNSUnavailable below.
	if ue, ok := errors.AsType[*egress.URLError](err); ok && !errors.Is(err, dnscheck.ErrTemporary) {
		return invalid(err, FieldError{Field: "url", Message: ue.Reason})
	}
	if errors.Is(err, imapin.ErrNoKey) {
		return &Error{Kind: NoSecretKey, Msg: "the server cannot store mailbox credentials: its secret key is not loaded", Err: err}
	}
	msg := "request failed"
	if se, ok := errors.AsType[*store.Error](err); ok {
		msg = se.Msg
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &Error{Kind: NotFound, Msg: msg, Err: err}
	case errors.Is(err, store.ErrConflict):
		return &Error{Kind: Conflict, Msg: msg, Err: err}
	case errors.Is(err, store.ErrLimit):
		return &Error{Kind: PlanLimit, Msg: msg, Err: err}
	case errors.Is(err, store.ErrInvalid):
		return &Error{Kind: Invalid, Msg: msg, Err: err}
	case errors.Is(err, dnscheck.ErrTemporary):
		return &Error{Kind: DNSUnavailable, Msg: errDNSUnavailable, Err: err}
	}
	return &Error{Kind: Internal, Msg: "internal error", Err: err}
}

// KindOf is AsError(err).Kind; nil is Internal, which callers never ask.
func KindOf(err error) Kind { return AsError(err).Kind }
