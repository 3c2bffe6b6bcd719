package app

import (
	"errors"
	"sync"
	"time"

	"github.com/dmarcd/dmarcd/store"
)

// Who is asking: API keys (presented to the API or to the sign-in form)
// and the web sessions they open. Failed attempts count per client
// address, the API's and the form's together, so that keys cannot be
// guessed at speed through either; a revoked key's count against that
// key alone (authFailure).

// Authenticate returns the Actor of the API key secret presented from
// client address addr. Errors: Throttled (RetryAfter set) while addr is
// over its failed-authentication limit, checked first, or while a
// revoked key is over its own; Unauthenticated for a key that is
// malformed, unknown or revoked, which counts against addr, or for a
// revoked key against that key (KeyID set).
func (a *App) Authenticate(addr, secret string) (Actor, error) {
	now := a.clock()
	if blocked, until := a.authFail.blocked(addr, now); blocked {
		return Actor{}, &Error{Kind: Throttled, Msg: "too many failed authentications from this address",
			RetryAfter: until.Sub(now)}
	}
	key, org, err := a.db.Authenticate(secret)
	if errors.Is(err, store.ErrNotFound) {
		return Actor{}, a.authFailure(addr, secret, now, err)
	}
	if err != nil {
		a.authFail.fail(addr, now)
		return Actor{}, err
	}
	return keyActor(key, org).WithAddr(addr), nil
}

// authFailure counts one failed authentication with secret from client
// address addr (cause: the store's not found) and returns the error to
// answer it with. A key the store knows that failed is a revoked one,
// and no guess: its client was not told of the revocation. Its failures
// count against that key alone, so that it cannot use up its address's
// budget and lock out every other key there (behind a proxy: everyone);
// past the same limit that key alone is Throttled, and the log says once
// a minute that it is still in use. Any other secret counts against addr.
func (a *App) authFailure(addr, secret string, now time.Time, cause error) error {
	revokedID := ""
	if store.ValidKeyFormat(secret) {
		id, err := a.db.ResolveAPIKey(secret)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			a.authFail.fail(addr, now)
			return err
		}
		revokedID = id
	}
	if revokedID == "" {
		a.authFail.fail(addr, now)
		return &Error{Kind: Unauthenticated, Msg: "missing or invalid API key", Err: cause}
	}
	if blocked, until := a.revokedFail.blocked(revokedID, now); blocked {
		return &Error{Kind: Throttled, Msg: "too many failed authentications with this key",
			RetryAfter: until.Sub(now), KeyID: revokedID, Err: cause}
	}
	if a.revokedFail.fail(revokedID, now) == 1 {
		a.log.Warn("revoked API key still in use: tell its user, or whatever runs with it, to use another key",
			"key_id", revokedID, "key_prefix", secret[:len(store.KeyPrefix)+4], "remote", addr)
	}
	return &Error{Kind: Unauthenticated, Msg: "missing or invalid API key", KeyID: revokedID, Err: cause}
}

// SignIn authenticates key as Authenticate does and opens a web session
// for it, returning the session's token (the cookie's value) and who
// signed in.
func (a *App) SignIn(addr, key string) (string, Actor, error) {
	if a.cfg.DisableKeySignIn {
		return "", Actor{}, &Error{Kind: Forbidden, Msg: "signing in with an API key is turned off on this server: sign in with your email"}
	}
	actor, err := a.Authenticate(addr, key)
	if err != nil {
		return "", Actor{}, err
	}
	token, _, err := a.db.CreateSession(actor.key.ID, a.now())
	if err != nil {
		return "", Actor{}, err
	}
	a.audit(actor, "sign-in", "key:"+actor.key.Prefix)
	return token, actor, nil
}

// KeySignInEnabled reports whether the web takes API keys at sign-in
// (--web-key-sign-in).
func (a *App) KeySignInEnabled() bool { return !a.cfg.DisableKeySignIn }

// Session returns the Actor and the session of token: Unauthenticated for
// a token unknown or expired, whose key was revoked, or whose person is
// no longer a member of the session's organization. The Actor has no
// client address: the web adds it (Actor.WithAddr).
func (a *App) Session(token string) (Actor, *store.Session, error) {
	s, key, org, err := a.db.FindSession(token, a.now())
	if errors.Is(err, store.ErrNotFound) {
		return Actor{}, nil, &Error{Kind: Unauthenticated, Msg: "not signed in", Err: err}
	}
	if err != nil {
		return Actor{}, nil, err
	}
	if s.Account != nil {
		role, _ := ParseRole(s.Role)
		return personActor(s.Account, org, role), s, nil
	}
	return keyActor(key, org), s, nil
}

// SignOut ends the session of token; an unknown one is no error.
func (a *App) SignOut(token string) error { return a.db.DeleteSession(token) }

// KeyUsed notes that the actor's key served a request now. The stamps are
// batched in memory, since writing one per request would cost an fsync
// each; FlushKeyUsage writes them.
func (a *App) KeyUsed(actor Actor) {
	if actor.key == nil {
		return
	}
	a.lastUsed.mu.Lock()
	a.lastUsed.m[actor.key.ID] = a.clock()
	a.lastUsed.mu.Unlock()
}

// FlushKeyUsage writes the batched last_used_at stamps in one
// transaction.
func (a *App) FlushKeyUsage() error {
	a.lastUsed.mu.Lock()
	m := a.lastUsed.m
	a.lastUsed.m = make(map[string]time.Time, len(m))
	a.lastUsed.mu.Unlock()
	if len(m) == 0 {
		return nil
	}
	for id, t := range m {
		m[id] = t.UTC().Truncate(time.Second)
	}
	return a.db.TouchAPIKeys(m)
}

// lastUsed is the batch of key stamps not yet written.
type lastUsed struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// failLimiter counts failed authentications per client address (or, for
// revoked keys, per key id) in fixed one-minute windows: past max
// failures the address is refused until its window ends. Entries of ended windows are dropped as the map grows, so
// a scan from many addresses cannot grow it without bound.
type failLimiter struct {
	max    int
	window time.Duration
	mu     sync.Mutex
	addrs  map[string]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

func newFailLimiter(max int) *failLimiter {
	return &failLimiter{max: max, window: time.Minute, addrs: map[string]*failWindow{}}
}

// blocked reports whether addr is over its limit at now, and until when.
func (l *failLimiter) blocked(addr string, now time.Time) (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.addrs[addr]
	if w == nil || now.Sub(w.start) >= l.window {
		return false, time.Time{}
	}
	return w.n >= l.max, w.start.Add(l.window)
}

// fail records one failed authentication from addr and returns how many
// its window holds now (1: the first of a window).
func (l *failLimiter) fail(addr string, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.addrs[addr]
	if w == nil || now.Sub(w.start) >= l.window {
		if len(l.addrs) >= 10000 {
			l.prune(now)
		}
		w = &failWindow{start: now}
		l.addrs[addr] = w
	}
	w.n++
	return w.n
}

func (l *failLimiter) prune(now time.Time) {
	for a, w := range l.addrs {
		if now.Sub(w.start) >= l.window {
			delete(l.addrs, a)
		}
	}
}

// AuthenticateSession returns the Actor of the web session token
// presented from client address addr as a bearer token (the API takes a
// person's session that way; docs/people.md). Errors as Authenticate: an
// unknown or expired token counts against addr.
func (a *App) AuthenticateSession(addr, token string) (Actor, error) {
	now := a.clock()
	if blocked, until := a.authFail.blocked(addr, now); blocked {
		return Actor{}, &Error{Kind: Throttled, Msg: "too many failed authentications from this address",
			RetryAfter: until.Sub(now)}
	}
	actor, _, err := a.Session(token)
	if err != nil {
		if KindOf(err) == Unauthenticated {
			a.authFail.fail(addr, now)
		}
		return Actor{}, err
	}
	return actor.WithAddr(addr), nil
}
