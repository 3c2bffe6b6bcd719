package imap

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Entry is one active mailbox as the Directory lists it. Err, when set,
// says why it cannot be polled (credentials that cannot be decrypted); it
// becomes the mailbox's last_error.
type Entry struct {
	Mailbox
	Version time.Time // changes with every update: the worker restarts
	Account Account
	Err     error
}

// Directory is the list of mailboxes and where their status goes;
// StoreDirectory implements it on the database.
type Directory interface {
	Mailboxes(ctx context.Context) ([]Entry, error)
	RecordPoll(id string, at time.Time, res PollResult, err error) error
}

// Manager polls every active mailbox: one goroutine and at most one
// connection per mailbox, at most Concurrency polls at once, and IDLE on up
// to MaxIdle connections kept open between polls; other mailboxes are
// polled every Interval on a new connection. Failures are retried with
// backoff (1s doubling, capped at Interval).
type Manager struct {
	Interval    time.Duration // 0: 5m
	Reload      time.Duration // how often the mailbox list is re-read; 0: 1m
	Concurrency int           // polls at once; 0: 8
	MaxIdle     int           // IDLE connections kept; 0: 64

	dir   Directory
	sink  Sink
	state State
	opts  *Options
	now   func() time.Time

	once      sync.Once
	refresh   chan chan struct{}
	sem       chan struct{}
	idleSlots chan struct{}
	mu        sync.Mutex
	workers   map[string]*worker
}

// NewManager returns a Manager; set its fields before Run.
func NewManager(dir Directory, sink Sink, state State, opts *Options) *Manager {
	if opts == nil {
		opts = &Options{}
	}
	return &Manager{dir: dir, sink: sink, state: state, opts: opts, now: time.Now, workers: map[string]*worker{}}
}

func (m *Manager) init() {
	m.once.Do(func() {
		if m.Interval <= 0 {
			m.Interval = 5 * time.Minute
		}
		if m.Reload <= 0 {
			m.Reload = time.Minute
		}
		if m.Concurrency <= 0 {
			m.Concurrency = 8
		}
		if m.MaxIdle <= 0 {
			m.MaxIdle = 64
		}
		m.refresh = make(chan chan struct{})
		m.sem = make(chan struct{}, m.Concurrency)
		m.idleSlots = make(chan struct{}, m.MaxIdle)
	})
}

// Run polls until ctx ends, re-reading the mailbox list every Reload (and
// on Refresh), and returns when every worker has stopped.
func (m *Manager) Run(ctx context.Context) error {
	m.init()
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(m.Reload)
	defer tick.Stop()
	var asked chan struct{}
	for {
		if err := m.sync(ctx, &wg); err != nil && ctx.Err() == nil {
			m.opts.logger().Warn("imap: reading the mailbox list failed", "err", err)
		}
		if asked != nil {
			close(asked)
			asked = nil
		}
		select {
		case asked = <-m.refresh:
		case <-ctx.Done():
			m.mu.Lock()
			for id, w := range m.workers {
				w.cancel()
				delete(m.workers, id)
			}
			m.mu.Unlock()
			return nil
		case <-tick.C:
		}
	}
}

// sync starts workers for new or changed mailboxes and stops those of
// mailboxes gone or deactivated.
func (m *Manager) sync(ctx context.Context, wg *sync.WaitGroup) error {
	entries, err := m.dir.Mailboxes(ctx)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.ID] = true
		if w := m.workers[e.ID]; w != nil && w.entry.Version.Equal(e.Version) {
			continue
		} else if w != nil {
			w.cancel()
		}
		wctx, cancel := context.WithCancel(ctx)
		w := &worker{m: m, entry: e, cancel: cancel, kick: make(chan struct{}, 1)}
		if e.Account.Credentials.OAuth2 != nil {
			w.tokens = NewTokenSource(*e.Account.Credentials.OAuth2, m.opts)
		}
		m.workers[e.ID] = w
		wg.Add(1)
		go func() { defer wg.Done(); w.run(wctx) }()
	}
	for id, w := range m.workers {
		if !seen[id] {
			w.cancel()
			delete(m.workers, id)
		}
	}
	return nil
}

// Refresh makes Run re-read the mailbox list now and returns once it has
// (workers of changed mailboxes restarted, those of removed ones stopped),
// or when ctx ends.
func (m *Manager) Refresh(ctx context.Context) error {
	m.init()
	done := make(chan struct{})
	select {
	case m.refresh <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrNotPolled means PollNow found no running worker for the mailbox
// (inactive, or not yet picked up): use PollOnce.
var ErrNotPolled = errors.New("imap: mailbox is not being polled")

// PollNow makes mailbox id's worker poll at once and returns that poll's
// result.
func (m *Manager) PollNow(ctx context.Context, id string) (PollResult, error) {
	m.mu.Lock()
	w := m.workers[id]
	m.mu.Unlock()
	if w == nil {
		return PollResult{}, ErrNotPolled
	}
	reply := make(chan pollReply, 1)
	w.mu.Lock()
	w.waiters = append(w.waiters, reply)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	select {
	case r := <-reply:
		return r.res, r.err
	case <-ctx.Done():
		return PollResult{}, ctx.Err()
	}
}

// PollOnce connects, polls one mailbox and disconnects, for a mailbox no
// worker runs.
func PollOnce(ctx context.Context, e Entry, sink Sink, state State, opts *Options) (PollResult, error) {
	c, err := Dial(ctx, e.Account, opts, nil)
	if err != nil {
		return PollResult{Errors: []string{err.Error()}}, err
	}
	defer c.Close()
	return c.Poll(ctx, e.Mailbox, sink, state)
}

type pollReply struct {
	res PollResult
	err error
}

// worker polls one mailbox.
type worker struct {
	m      *Manager
	entry  Entry
	cancel context.CancelFunc
	tokens *TokenSource
	kick   chan struct{}

	mu      sync.Mutex
	waiters []chan pollReply
}

const (
	firstBackoff = time.Second
	idleRestart  = 25 * time.Minute // below the 29 min of RFC 2177
)

func (w *worker) run(ctx context.Context) {
	m := w.m
	log := m.opts.logger().With("mailbox", w.entry.ID)
	var conn *Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		w.mu.Lock()
		waiters := w.waiters
		w.waiters = nil
		w.mu.Unlock()

		select {
		case m.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		res, err := w.pollOnce(ctx, &conn)
		<-m.sem
		if ctx.Err() != nil {
			return
		}
		if rerr := m.dir.RecordPoll(w.entry.ID, m.now(), res, err); rerr != nil {
			log.Warn("imap: recording the poll failed", "err", rerr)
		}
		for _, r := range waiters {
			r <- pollReply{res, err}
		}
		if err != nil {
			log.Info("imap: poll failed", "err", err.Error())
			if conn != nil {
				conn.Close()
				conn = nil
			}
			backoff = min(max(2*backoff, firstBackoff), m.Interval)
			w.wait(ctx, jitter(backoff))
			continue
		}
		backoff = 0
		log.Debug("imap: polled", "messages", res.Messages, "idle", conn.CanIdle())
		if conn.CanIdle() && w.idleSlot() {
			_, ierr := conn.Idle(ctx, min(m.Interval, idleRestart), w.kick)
			<-m.idleSlots
			if ierr != nil && ctx.Err() == nil {
				log.Info("imap: idle ended", "err", ierr.Error())
				conn.Close()
				conn = nil
			}
			continue
		}
		conn.Close()
		conn = nil
		w.wait(ctx, m.Interval)
	}
}

func (w *worker) pollOnce(ctx context.Context, conn **Conn) (PollResult, error) {
	if w.entry.Err != nil {
		return PollResult{Errors: []string{w.entry.Err.Error()}}, w.entry.Err
	}
	if *conn == nil {
		c, err := Dial(ctx, w.entry.Account, w.m.opts, w.tokens)
		if err != nil {
			return PollResult{Errors: []string{err.Error()}}, err
		}
		*conn = c
	}
	return (*conn).Poll(ctx, w.entry.Mailbox, w.m.sink, w.m.state)
}

func (w *worker) idleSlot() bool {
	select {
	case w.m.idleSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

// wait sleeps d, or until a PollNow kick or ctx ends.
func (w *worker) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.kick:
	case <-ctx.Done():
	}
}

// jitter spreads retries of many mailboxes by up to a fifth.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}
