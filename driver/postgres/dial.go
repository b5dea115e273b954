package postgres

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Freeing a dead connection's pool slot at once.
//
// When a statement's context ends, pgx closes its connection in the
// background: it dials the server again to send a cancel request and waits
// for the server to acknowledge it, then drains the connection's socket,
// each for up to a hard-coded 15 s (pgconn's asyncClose); pgxpool frees the
// connection's slot only when that is done. Against a server that stopped
// answering — a frozen primary after a failover — every slot of the pool
// whose statement hit its deadline stayed taken for those 15 s, and nothing
// could reach the new primary meanwhile. So the pools Open makes bound
// both waits by cancelWait: each connection dials through a dialer of its
// own, which bounds any later dial of that connection (the cancel request's)
// to cancelWait, and BeforeClose closes the socket of a connection pgx
// already gave up on, which ends the drain. The cancel request has been
// written by then; only the wait for its acknowledgement is cut short.
// (A connection's dialer knows a cancel request's dial from a connection
// attempt's by AfterConnect: pgx dials again for a connection it made only
// to cancel.)

// cancelWait bounds the wait for a cancel request's acknowledgement and for
// the drain of a broken connection.
const cancelWait = time.Second

// boundCleanup sets cfg's hooks so that a broken connection's cleanup
// ends within cancelWait (see above); hooks already set still run. The
// wake-up listener's connection, made with the pool's hooks, is dialed the
// same way.
func boundCleanup(cfg *pgxpool.Config) {
	before := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		if before != nil {
			if err := before(ctx, cc); err != nil {
				return err
			}
		}
		bindDialer(&cc.Config)
		return nil
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if t := tracked(c.PgConn().Conn()); t != nil {
			t.d.connected.Store(true)
		}
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
	closing := cfg.BeforeClose
	cfg.BeforeClose = func(c *pgx.Conn) {
		if closing != nil {
			closing(c)
		}
		if c.IsClosed() {
			// pgx gave up on it (a statement's context ended) and is
			// cleaning up in the background: end the drain of its socket.
			_ = c.PgConn().Conn().Close()
		}
	}
}

// bindDialer gives the connection cc configures a dialer of its own.
func bindDialer(cc *pgconn.Config) {
	dial := cc.DialFunc
	if dial == nil {
		d := &net.Dialer{KeepAlive: 5 * time.Minute}
		dial = d.DialContext
	}
	cd := &connDialer{dial: dial}
	cc.DialFunc = cd.DialContext
}

// connDialer dials for one pgx connection. Once that connection is made
// (connected), a dial is not a connection attempt but a cancel request: its
// connection is bounded to cancelWait.
type connDialer struct {
	dial      pgconn.DialFunc
	connected atomic.Bool
}

func (d *connDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if d.connected.Load() {
		b := &boundedConn{Conn: c, until: time.Now().Add(cancelWait)}
		_ = c.SetDeadline(b.until)
		return b, nil
	}
	return &trackedConn{Conn: c, d: d}, nil
}

// trackedConn is a connection attempt of a connDialer.
type trackedConn struct {
	net.Conn
	d *connDialer
}

// tracked finds the trackedConn under c (a TLS connection's, or c itself).
func tracked(c net.Conn) *trackedConn {
	for range 3 {
		switch v := c.(type) {
		case *trackedConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// boundedConn is a cancel request's connection: no deadline set on it may
// pass until.
type boundedConn struct {
	net.Conn
	until time.Time
}

func (c *boundedConn) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(c.until) {
		return c.until
	}
	return t
}

func (c *boundedConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *boundedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.clamp(t))
}
func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}
