package deadline

import (
	"context"
	"time"
)

// A Socket is the connection a store call reads and writes: a net.Conn.
type Socket interface {
	SetDeadline(t time.Time) error
}

// Attach ties s, the socket the call bounded by ctx is about to use, to
// ctx's deadline, when ctx is one Bound returned for a context nothing
// cancels (the shared-timer kind: what oke gives each store call). Once the
// deadline passes, s's deadline is set to the past, so a read or write
// blocked on s fails at once; the driver then sees a network error and
// closes the connection, and end marks the call's error ErrTimeout as
// usual.
//
// It returns a context with ctx's values and deadline and no Done channel,
// to give the driver for the call instead of ctx: a driver that watches its
// context's Done for each statement (pgx does, with a context.AfterFunc and
// a channel per query) then has nothing to watch, and the deadline costs
// the call two uncontended locks instead. ok is false, and ctx must be used
// as it is, when ctx is not such a context, or when another socket is
// tied to it already (one call on ctx inside another's: the inner one is
// watched by its driver as usual).
//
// When ok, the caller must call Detach with s before s is used for
// anything else (before its connection goes back to a pool).
func Attach(ctx context.Context, s Socket) (_ context.Context, ok bool) {
	b, ok := ctx.(*bound)
	if !ok {
		return ctx, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sock != nil || b.err == context.Canceled {
		return ctx, false
	}
	b.sock, b.cut = s, false
	if b.err == context.DeadlineExceeded {
		b.cutLocked()
	}
	return (*quiet)(b), true
}

// Detach unties s, which Attach tied to ctx. It reports whether the
// deadline cut s: its deadline is then in the past, and a call may have
// been ended mid-message, so the caller must close the connection rather
// than use it again. It does nothing, and reports false, for a socket
// that is not the one tied to ctx.
func Detach(ctx context.Context, s Socket) (cut bool) {
	b, ok := ctx.(*bound)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sock != s {
		return false
	}
	b.sock = nil
	return b.cut
}

// cutLocked sets b's socket's deadline to the past; b.mu is held, so
// Detach cannot return between the decision and the cut (the socket would
// go back to its pool with a deadline in the past).
func (b *bound) cutLocked() {
	if b.sock == nil || b.cut {
		return
	}
	b.cut = true
	_ = b.sock.SetDeadline(time.Unix(1, 0))
}

// quiet is a bound's context for a driver's statement (Attach): its values
// and deadline, and no Done channel, so nothing watches it; the bound cuts
// the socket instead. It is the bound itself, under a type of its own.
type quiet bound

func (q *quiet) Deadline() (time.Time, bool) { return q.deadline, true }
func (q *quiet) Done() <-chan struct{}       { return nil }
func (q *quiet) Err() error                  { return nil }
func (q *quiet) Value(key any) any           { return q.parent.Value(key) }

// Hush returns the context to hand database/sql for a flow's statement
// bounded by ctx (Statement) on a driver that unhushes it (an Unhusher):
// ctx's values and deadline and no Done channel, so that database/sql
// starts no goroutine and no context of its own to watch the statement;
// the driver gets ctx back with Unhush and bounds the statement with it
// (pgpipe ties it to the socket). ctx is returned as is when it is not a
// statement's bound on the shared timer.
//
// Only hand the result to a driver that unhushes every context it is
// given: anything else would see a deadline it never enforces.
func Hush(ctx context.Context) context.Context {
	if b, ok := ctx.(*bound); ok && b.stmt {
		return (*hushed)(b)
	}
	return ctx
}

// Unhush returns the bound Hush hushed, or ctx as it is.
func Unhush(ctx context.Context) context.Context {
	if h, ok := ctx.(*hushed); ok {
		return (*bound)(h)
	}
	return ctx
}

// An Unhusher is a database/sql driver (the sql.DB's Driver()) that calls
// Unhush on the context of each statement, so that oke may Hush them.
type Unhusher interface {
	UnhushesStatements()
}

// hushed is a bound's context as database/sql sees it (Hush): quiet's
// methods, under a type of its own so that Unhush never takes Attach's
// quiet context for one.
type hushed bound

func (h *hushed) Deadline() (time.Time, bool) { return h.deadline, true }
func (h *hushed) Done() <-chan struct{}       { return nil }
func (h *hushed) Err() error                  { return nil }
func (h *hushed) Value(key any) any           { return h.parent.Value(key) }
