package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/driver"
)

// Wake-ups: CreateRun (an unowned run, due now) and FinishRun (a park: a
// release to RunRunning or a sleep) send pg_notify on the schema's channel
// in the same statement, so the notification goes out when, and only if,
// the write commits. WatchDue LISTENs on a connection of its own and passes
// each notification on to the watchers; NextDue tells the scheduler when the
// next parked run wakes, so it can arm a timer instead of waiting for a
// poll.

const (
	// listenCheck is how long the listener waits for a notification before
	// it pings its connection, so that a connection that died silently (no
	// RST, a NAT that forgot it) is noticed and replaced.
	listenCheck = 30 * time.Second
	// listenBackoffMin and listenBackoffMax bound the wait between attempts
	// to reconnect the listener; the wait doubles after each failure and
	// starts over once LISTEN succeeds.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// maxIdentifier is the longest identifier (and so channel name) Postgres
// keeps: NAMEDATALEN-1 bytes. LISTEN truncates a longer one while pg_notify
// refuses it, so a longer name would never match.
const maxIdentifier = 63

// channelName is schema's notification channel: "oke_due:<schema>", or,
// when that is too long for an identifier, the schema's SHA-256 prefix in
// its place. One channel per schema keeps apps (and tests) that share a
// database but not a schema from waking each other.
func channelName(schema string) string { return prefixedChannel("oke_due:", schema) }

// WakeChannel returns the LISTEN/NOTIFY channel on which the driver
// announces runs that became due: "oke_due:" and the schema's name (hashed
// when the two would be longer than 63 bytes).
func (d *Driver) WakeChannel() string { return d.channel }

// notifySQL sends the wake-up notification; $n is the channel parameter.
// As a scalar subquery it runs only when the CASE that holds it takes its
// branch.
func notifySQL(n string) string {
	return `(SELECT count(*) FROM (SELECT pg_notify(` + n + `, '')) AS n) > 0`
}

// watch is the state of the driver's listener, shared by its watchers.
type watch struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// users counts what needs the listener: the watchers of WatchDue, the
	// hearers of HearWaiters and the waiters of WaitFor. It runs while
	// there is one.
	users  int
	live   bool               // the listener LISTENs right now
	cancel context.CancelFunc // stops the listener; nil when none runs
	done   chan struct{}      // closed when the listener has stopped
	keys   keyWatch           // waits for keys to complete (keywait.go)
}

var _ driver.Notifier = (*Driver)(nil)

// WatchDue implements driver.Notifier. The first watcher starts a listener:
// a connection of its own (made with the pool's connection settings, so it
// takes no slot in the pool) that LISTENs on WakeChannel. When the
// connection is lost, the listener reconnects with backoff (100 ms doubling
// to 5 s) and signals once after each LISTEN, since notifications sent while
// it was down are lost. The last watcher's stop, or Close, stops it. Behind
// a pooler in transaction mode LISTEN does not work; the scheduler's polling
// still does.
func (d *Driver) WatchDue() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if d.closed.Load() {
		return c, func() {} // a closed driver never signals
	}
	if w.subs == nil {
		w.subs = make(map[chan struct{}]struct{})
	}
	w.subs[c] = struct{}{}
	d.useListener()
	var once sync.Once
	return c, func() { once.Do(func() { d.unwatch(c) }) }
}

// useListener counts one more user of the listener, and starts it if none
// runs. The caller holds d.watch.mu.
func (d *Driver) useListener() {
	w := &d.watch
	w.users++
	if w.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.done = cancel, make(chan struct{})
		go d.listen(ctx, w.done)
	}
}

// leaveListener counts one user of the listener less. The caller holds
// d.watch.mu; when that was the last user, it calls the returned function
// once it has unlocked, to stop the listener and wait for it.
func (d *Driver) leaveListener() (stop func()) {
	w := &d.watch
	if w.users--; w.users > 0 || w.cancel == nil {
		return func() {}
	}
	cancel, done := w.cancel, w.done
	w.cancel, w.done = nil, nil
	return func() {
		cancel()
		<-done
	}
}

// unwatch removes watcher c and stops the listener when c was its last user.
func (d *Driver) unwatch(c chan struct{}) {
	w := &d.watch
	w.mu.Lock()
	delete(w.subs, c)
	stop := d.leaveListener()
	w.mu.Unlock()
	stop()
}

// stopWatch stops the listener for Close; watchers stay, and never hear
// from the driver again.
func (d *Driver) stopWatch() {
	w := &d.watch
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.cancel, w.done = nil, nil
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// signal tells every watcher that a run may be due, without blocking: a
// watcher that has a signal pending already needs no second one.
func (d *Driver) signal() {
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// listen keeps a LISTEN connection until ctx is cancelled, reconnecting
// with backoff when it is lost.
func (d *Driver) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	backoff := listenBackoffMin
	for {
		err := d.listenOnce(ctx, func() { backoff = listenBackoffMin })
		if ctx.Err() != nil {
			return
		}
		slog.Default().Warn("oke: postgres wake-up listener lost its connection; reconnecting (polling covers the gap)",
			"schema", d.schema, "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listenOnce connects, LISTENs, signals the watchers (anything sent before
// now was missed), and passes notifications on until the connection fails
// or ctx is cancelled. listening is called once LISTEN has succeeded.
func (d *Driver) listenOnce(ctx context.Context, listening func()) error {
	// The pool's own connect hooks apply to this connection too (token
	// auth, session settings), as to any connection of the pool.
	pc := d.pool.Config()
	cc := pc.ConnConfig
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cc); err != nil {
			return fmt.Errorf("postgres: listen: before connect: %w", err)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("postgres: listen: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if pc.AfterConnect != nil {
		if err := pc.AfterConnect(ctx, conn); err != nil {
			return fmt.Errorf("postgres: listen: after connect: %w", err)
		}
	}
	// The key waits' channel first: the last query of the connection, which
	// pg_stat_activity shows, is then the LISTEN on the wake-up channel.
	waitCh := d.waitChannel()
	for _, ch := range []string{waitCh, d.channel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("postgres: listen on %q: %w", ch, err)
		}
	}
	listening()
	defer d.listenerDown()
	if err := d.listenerUp(ctx, conn); err != nil {
		return err
	}
	d.signal()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && n.Channel == waitCh:
			d.heard(n.Payload)
		case err == nil:
			d.signal()
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet for a while: check that the connection still answers.
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("postgres: listen: ping: %w", err)
			}
		default:
			return fmt.Errorf("postgres: listen: wait for notification: %w", err)
		}
	}
}

// NextDue implements driver.Notifier: the time from now() to the earliest
// wake time of an unowned, unfinished run that is not due yet. It reads the
// head of the partial index on wake_at that DueRuns uses.
func (d *Driver) NextDue(ctx context.Context, flows []string) (time.Duration, bool, error) {
	if err := d.check(); err != nil {
		return 0, false, err
	}
	var us *int64
	err := d.pool.QueryRow(ctx, d.sql(`SELECT (extract(epoch FROM min(r.wake_at) - now()) * 1000000)::bigint
		FROM {s}.oke_runs r WHERE r.status IN (1, 2) AND r.owner = '' AND r.wake_at > now()
		AND ($1::text[] IS NULL OR r.flow = ANY($1))`), flowsArg(flows)).Scan(&us)
	if err != nil {
		return 0, false, d.wrap("next due", err)
	}
	if us == nil {
		return 0, false, nil
	}
	return time.Duration(*us) * time.Microsecond, true, nil
}
