package imap

import (
	"errors"

	"github.com/dmarcd/dmarcd/store"
)

// Rules of a mailbox change that the application layer (package app)
// applies, here beside the connection they protect.

// SecretRequired reports whether changing mailbox old into m would send
// the stored credentials where they were not given for: another host,
// port, security or username. Such a change needs the secret sent again
// (the password; for OAuth2 the oauth2 object, whose token_url can only
// change with it, as it needs a client secret or refresh token anyway).
func SecretRequired(old, m *store.Mailbox) bool {
	return old.Host != m.Host || old.Port != m.Port || old.Security != m.Security || old.Username != m.Username
}

// SecretAgain is the field and message of the refusal of a change that
// SecretRequired holds for, made without new credentials.
func SecretAgain(auth string) (field, msg string) {
	field, what := "password", "the password"
	if auth == store.AuthOAuth2 {
		field, what = "oauth2", "the OAuth2 sign-in (with its client secret or refresh token)"
	}
	return field, "is required again: the host, port, security or username changes, and " + what +
		" stored for this mailbox is only sent to the server it was given for"
}

// ArchiveFolderRefused returns, for an error of Check (Intake.Try), the
// server's refusal of the archive folder in its words: a name it will not
// take, a folder it will not create. ok is false for any other error (the
// connection, the login, the folder to read).
func ArchiveFolderRefused(err error) (msg string, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.Step == stepArchive && refusedForGood(e.Err) {
		return e.Msg, true
	}
	return "", false
}
