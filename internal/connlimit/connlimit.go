// Package connlimit caps the connections an http.Server holds open, without
// ever blocking its accept loop.
//
// An http.Server keeps every keep-alive connection until its IdleTimeout,
// and nothing bounds how many there are: a client that opens thousands of
// connections, sends one request on each and keeps them, holds a file
// descriptor per connection until the process hits its open-file limit —
// then accept fails (EMFILE) and new clients get no answer at all. A
// listener that blocks in Accept at a cap (golang.org/x/net/netutil's
// LimitListener) fails the same way, more politely: new clients wait in
// the kernel's backlog while the idle connections are kept.
//
// A Limiter counts the connections its Listener accepted and not yet
// closed, and learns from the server's ConnState hook which of them are
// idle (between requests) or new (no request read yet). At the cap, a new
// connection takes the place of the one idle the longest — closing an idle
// keep-alive connection is what the server's IdleTimeout does anyway, and
// clients retry a request lost on a reused connection — else of the oldest
// new one (a client that connected and sent nothing); only when every
// connection is busy (a request running, or hijacked) is the new one closed
// at once. So a flood of idle connections cannot shut out a fresh client
// or a health check, and the count never passes the cap:
//
//	l := connlimit.New(4096)
//	srv := &http.Server{Handler: h, IdleTimeout: 30 * time.Second, ConnState: l.ConnState}
//	ln, _ := net.Listen("tcp", addr)
//	srv.Serve(l.Listener(ln))
//
// Accept errors pass through unchanged: http.Server.Serve backs off on a
// temporary one (EMFILE included) instead of spinning or exiting. Keep the
// cap below the process's open-file limit (FDLimit) with room for the
// other files it needs (databases, logs).
package connlimit

import (
	"container/list"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Limiter caps the connections of the listeners it wraps, together. Its
// ConnState must be the server's http.Server.ConnState (call it from
// yours if you have one); without it no connection is known to be idle
// and the cap refuses new connections instead of making room. It is safe
// for concurrent use.
type Limiter struct {
	max int
	// AtCap, when set before the Limiter is used, is called (from the
	// accept loop, outside the Limiter's lock) each time a connection
	// arrives at the cap: evicted tells whether an idle or new one was
	// closed to make room (false: the new one was refused). Keep it cheap
	// and rate-limit what it logs: a flood calls it per connection.
	AtCap func(evicted bool)

	mu       sync.Mutex
	open     int
	idle     list.List // of *conn: between requests, longest idle first
	fresh    list.List // of *conn: no request read yet, oldest first
	evicted  atomic.Int64
	refused  atomic.Int64
	accepted atomic.Int64
}

// New returns a Limiter that lets at most max connections be open at once
// (at least 1).
func New(max int) *Limiter {
	if max < 1 {
		max = 1
	}
	return &Limiter{max: max}
}

// Max is the cap.
func (l *Limiter) Max() int { return l.max }

// Stats are a Limiter's counts.
type Stats struct {
	Open     int   // connections open now (at most Max)
	Idle     int   // of them, between requests
	Accepted int64 // connections let in, ever
	Evicted  int64 // idle or new connections closed to make room for another
	Refused  int64 // connections closed at once: every open one was busy
}

// Stats returns the Limiter's counts.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, Idle: l.idle.Len(), Accepted: l.accepted.Load(),
		Evicted: l.evicted.Load(), Refused: l.refused.Load()}
}

// Listener wraps ln: the connections it accepts count against the cap
// until they are closed.
func (l *Limiter) Listener(ln net.Listener) net.Listener { return &listener{Listener: ln, l: l} }

type listener struct {
	net.Listener
	l *Limiter
}

// Accept accepts the next connection that fits under the cap: at the cap
// it closes the longest-idle connection (else the oldest new one) to make
// room, or, when every connection is busy, closes the new one and accepts
// the next. It never waits for room.
func (ln *listener) Accept() (net.Conn, error) {
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			return nil, err // http.Server.Serve backs off on a temporary error (EMFILE)
		}
		lc := &conn{Conn: c, l: ln.l}
		admitted, victim := ln.l.admit(lc)
		if victim != nil {
			victim.Conn.Close() // its serving goroutine sees the close and ends
		}
		if (victim != nil || !admitted) && ln.l.AtCap != nil {
			ln.l.AtCap(victim != nil)
		}
		if admitted {
			return lc, nil
		}
		c.Close()
	}
}

// admit counts c in if there is room, or makes room by taking an idle (else
// new) connection's place; the victim, if any, is for the caller to close.
func (l *Limiter) admit(c *conn) (admitted bool, victim *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		e := l.idle.Front()
		if e == nil {
			e = l.fresh.Front()
		}
		if e == nil {
			l.refused.Add(1)
			return false, nil
		}
		victim = e.Value.(*conn)
		l.drop(victim) // its place is c's now
		l.evicted.Add(1)
	}
	l.open++
	c.counted = true
	c.elem, c.in = l.fresh.PushBack(c), &l.fresh
	l.accepted.Add(1)
	return true, victim
}

// drop stops counting c (l.mu held).
func (l *Limiter) drop(c *conn) {
	if !c.counted {
		return
	}
	c.counted = false
	l.open--
	c.unlist()
}

// ConnState tracks which connections are idle or new, the ones that may
// be closed to make room. Set it as http.Server.ConnState. Connections
// that did not come from this Limiter's listeners are ignored.
func (l *Limiter) ConnState(nc net.Conn, st http.ConnState) {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok || c.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.counted {
		return
	}
	switch st {
	case http.StateIdle:
		c.unlist()
		c.elem, c.in = l.idle.PushBack(c), &l.idle
	case http.StateNew:
		// Listed as new since Accept.
	default: // StateActive, StateHijacked, StateClosed: not to be closed by us
		c.unlist()
	}
}

// conn is a connection the Limiter counts until it is closed.
type conn struct {
	net.Conn
	l *Limiter
	// Guarded by l.mu:
	counted bool          // it holds a place under the cap
	elem    *list.Element // its element in *in, when idle or new
	in      *list.List
}

// unlist takes c off the idle or new list (l.mu held).
func (c *conn) unlist() {
	if c.elem != nil {
		c.in.Remove(c.elem)
		c.elem, c.in = nil, nil
	}
}

// Close frees c's place under the cap and closes it.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite half-closes c when the connection can (a TCP connection):
// http.Server uses it to let a client read an answer before the close.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// ReadFrom keeps the TCP connection's sendfile/splice path for bodies
// copied from files.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
