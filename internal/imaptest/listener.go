package imaptest

import (
	"net"
	"sync/atomic"
	"testing"
)

// Listener is a loopback port that counts the connections it gets and
// closes each at once: a server that must not be dialled (a mailbox's
// stored password must never reach it). It stops when the test ends.
type Listener struct {
	Port int
	n    atomic.Int32
}

// NewListener starts a Listener.
func NewListener(tb testing.TB) *Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	l := &Listener{Port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.n.Add(1)
			c.Close()
		}
	}()
	return l
}

// Connections returns how many connections it got.
func (l *Listener) Connections() int { return int(l.n.Load()) }
