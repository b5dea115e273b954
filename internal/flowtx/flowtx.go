// Package flowtx is a flow's transaction (oke's Fx.Tx): opened on first use,
// ended by oke once the flow (or a durable step) returns — rolled back on a
// failure, committed on success, and on a driver that keeps its rows in the
// same database (driver.TxDriver) committed together with the flow's
// outcome, which is what makes writes to that database exactly-once.
//
// It holds no rule of what an outcome means for the Idempotency-Key row:
// the caller says how the transaction ends.
package flowtx

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/deadline"
)

// Tx is a flow's transaction: a database/sql transaction on the app's own
// database, or — joined — a connection of the driver's database on which
// the driver began the transaction, and on which it stores the outcome and
// commits.
type Tx struct {
	tx   *sql.Tx   // on the app's own database, begun on own
	own  *sql.Conn // tx's connection, discarded when a commit fails
	conn *sql.Conn // joined: a connection the driver began, ended by the driver

	// timeout bounds the statements oke sends itself: BEGIN (the first
	// statement, First), COMMIT, ROLLBACK. txCtx is the context tx was
	// begun on, which database/sql keeps until it ends: its deadline is
	// armed for each of them.
	timeout time.Duration
	txCtx   *deadline.Armed
	sent    atomic.Bool // a statement went on conn: its BEGIN with it
	hush    bool        // conn's driver unhushes its statements' contexts (deadline.Unhusher)

	// effects of its statements (a bit mask the caller defines), recorded
	// on the flow once it commits (or may have): rolled-back writes changed
	// nothing.
	effects atomic.Uint32
}

// Begin opens a flow's transaction: on d's database when d is a
// driver.TxDriver (joined; with the claim ticket t sent ahead of its first
// statement when d is a driver.TxClaimer and t is not nil), else on db. It
// outlives ctx's cancellation (the flow's timeout must not roll it back once
// the flow returned) but not timeout, which bounds the connection's
// acquisition, the BEGIN (on a joined transaction: its first statement,
// which carries it, see First), the COMMIT and the ROLLBACK; zero or less is
// no bound. nodb is the error when there is no database at all.
func Begin(ctx context.Context, d driver.Driver, db *sql.DB, t driver.ClaimTicket, nodb error, timeout time.Duration) (*Tx, error) {
	td, joined := d.(driver.TxDriver)
	if joined {
		db = td.DB()
	}
	if db == nil {
		return nil, nodb
	}
	ctx = context.WithoutCancel(ctx)
	if !joined {
		// On a connection of its own, which a failed commit discards: a
		// database may keep the transaction open after its COMMIT failed
		// (SQLite does, for a deferred constraint or a busy database),
		// and the pool must not hand it to the next caller, who could
		// commit it. Getting the connection and BEGIN are bounded by
		// timeout; database/sql keeps a, the context tx was begun on,
		// until tx ends, and COMMIT and ROLLBACK arm it again.
		a := deadline.NewArmed(ctx)
		a.Arm(timeout)
		own, err := db.Conn(a)
		if err != nil {
			return nil, fmt.Errorf("begin transaction: %w", a.Disarm(err))
		}
		tx, err := own.BeginTx(a, nil)
		if err = a.Disarm(err); err != nil {
			if tx != nil {
				tx.Rollback()
			}
			own.Close()
			return nil, fmt.Errorf("begin transaction: %w", err)
		}
		return &Tx{tx: tx, own: own, timeout: timeout, txCtx: a}, nil
	}
	// On the driver's database the transaction is the driver's Begin on a
	// connection of its own, so that the driver can begin it with the
	// flow's first statement and store the outcome and commit in one go.
	cctx, end := deadline.Bound(ctx, timeout)
	conn, err := db.Conn(cctx)
	if err = end(err); err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	if tc, ok := d.(driver.TxClaimer); ok && t != nil {
		err = tc.BeginClaimed(ctx, conn, t)
	} else {
		err = td.Begin(ctx, conn)
	}
	if err != nil {
		discard(conn)
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	_, hush := db.Driver().(deadline.Unhusher)
	return &Tx{conn: conn, timeout: timeout, hush: hush}, nil
}

// Hush returns the context to hand database/sql for a statement on t
// bounded by ctx: deadline.Hush's, when t's connection's driver unhushes
// it (database/sql then watches nothing: the driver bounds the statement),
// else ctx.
func (t *Tx) Hush(ctx context.Context) context.Context {
	if t.hush {
		return deadline.Hush(ctx)
	}
	return ctx
}

// First returns the context for a statement of the flow on t, and the
// deadline armed on it, if any. The first statement on a joined t carries
// its BEGIN (and, with a claim ticket, the claim): unless bounded says ctx
// bounds it already (deadline.Statement's deadline, which is t's timeout),
// it is bounded by t's timeout until it returns — call armed.Disarm with
// its error then; the rows of a query may be read after, without the
// bound. Later statements, and those on the app's own database (whose
// BEGIN Begin sent), get ctx as is and no armed deadline.
func (t *Tx) First(ctx context.Context, bounded bool) (_ context.Context, armed *deadline.Armed) {
	if t.conn == nil || t.timeout <= 0 || t.sent.Load() || !t.sent.CompareAndSwap(false, true) || bounded {
		return ctx, nil
	}
	a := deadline.NewArmed(ctx)
	a.Arm(t.timeout)
	return a, a
}

// bounded runs a statement oke sends itself on t (COMMIT, ROLLBACK) with
// t's timeout: on a joined t with a context of its own, else with the
// deadline armed on the context database/sql kept from BEGIN.
func (t *Tx) bounded(call func(ctx context.Context) error) error {
	if t.tx != nil {
		if t.txCtx == nil {
			return call(context.Background())
		}
		t.txCtx.Arm(t.timeout)
		return t.txCtx.Disarm(call(context.Background()))
	}
	ctx, end := deadline.Bound(context.Background(), t.timeout)
	return end(call(ctx))
}

// Joined reports whether t is on the driver's own database: the flow's
// outcome (its stored response, or a step's saved result) is then written
// in t before it commits (CommitWith).
func (t *Tx) Joined() bool { return t.conn != nil }

// Queryer is where the flow's statements go: a *sql.Tx or a *sql.Conn.
type Queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Queryer returns where the flow's statements go.
func (t *Tx) Queryer() Queryer {
	if t.tx != nil {
		return t.tx
	}
	return t.conn
}

// Note adds the effect bits of a statement sent in t.
func (t *Tx) Note(bits uint32) { t.effects.Or(bits) }

// Rollback ends t without its writes. A nil t is a no-op.
func (t *Tx) Rollback() {
	if t == nil {
		return
	}
	if t.tx != nil {
		if err := t.bounded(func(context.Context) error { return t.tx.Rollback() }); err != nil && !errors.Is(err, sql.ErrTxDone) {
			discard(t.own)
			return
		}
		t.own.Close()
		return
	}
	if err := t.bounded(func(ctx context.Context) error {
		_, err := t.conn.ExecContext(ctx, "ROLLBACK")
		return err
	}); err != nil {
		discard(t.conn)
		return
	}
	t.conn.Close()
}

// Commit commits t. It returns the effect bits of its statements, which the
// caller records on the flow whatever the error: a failed commit may still
// have committed (the connection can break after the server did), and
// erring that way never runs a flow twice.
func (t *Tx) Commit() (effects uint32, err error) {
	return t.CommitWith(func(conn *sql.Conn) error {
		return t.bounded(func(ctx context.Context) error {
			_, err := conn.ExecContext(ctx, "COMMIT")
			return err
		})
	})
}

// CommitWith ends a joined t with end, which stores the flow's outcome in
// it and commits (driver.TxDriver's CommitComplete or CommitStep), or
// commits a transaction on the app's own database. It returns the effects
// to record: none when end reports that it rolled back (driver.ErrNotOwner,
// driver.ErrStepOrder: nothing happened) or when the commit's error proves
// that nothing committed (driver.ErrNotCommitted, which the error then
// wraps: see NotCommitted), else t's, error or not.
func (t *Tx) CommitWith(end func(conn *sql.Conn) error) (effects uint32, err error) {
	if t.tx != nil {
		err = t.bounded(func(context.Context) error { return t.tx.Commit() })
		if err == nil {
			t.own.Close()
		} else {
			discard(t.own) // a transaction still open in it rolls back
			if NotCommitted(err) && !errors.Is(err, driver.ErrNotCommitted) {
				err = fmt.Errorf("%w: %w", driver.ErrNotCommitted, err)
			}
		}
	} else {
		err = end(t.conn)
		switch {
		case err == nil:
			t.conn.Close()
		case errors.Is(err, driver.ErrNotOwner) || errors.Is(err, driver.ErrStepOrder):
			t.conn.Close() // rolled back: nothing happened
			return 0, err
		default:
			discard(t.conn)
		}
	}
	if err != nil {
		err = fmt.Errorf("commit the flow's transaction: %w", err)
		if errors.Is(err, driver.ErrNotCommitted) {
			return 0, err // rolled back: nothing of it happened
		}
		return t.effects.Load(), err
	}
	return t.effects.Load(), nil
}

// NotCommitted reports whether err, from a COMMIT, proves that the
// transaction did not commit, so that nothing it wrote happened:
//
//   - driver.ErrNotCommitted (a driver's own commit said so);
//   - an error with a SQLSTATE (SQLState() string, as pgx's and lib/pq's
//     errors have) outside the classes that may come after a commit or
//     instead of its answer: 08 (connection), 57 (operator intervention:
//     a shutdown, which can end a session that committed while it waited
//     for a synchronous standby), 58 (system) and XX (internal);
//   - pgx's "commit unexpectedly resulted in rollback" (the transaction had
//     failed before its COMMIT);
//   - a SQLite error (modernc.org/sqlite's, with a Code() int) whose
//     primary code says the COMMIT did not happen: SQLITE_BUSY, LOCKED,
//     NOMEM, READONLY, INTERRUPT, FULL or CONSTRAINT. SQLite may keep the
//     transaction open after such a COMMIT; CommitWith discards the
//     connection, which rolls it back. I/O errors are not among them: in
//     WAL mode the commit may be on disk.
//
// Anything else — no answer, a lost connection, a timeout — may have
// committed.
func NotCommitted(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrNotCommitted) {
		return true
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) {
		code := state.SQLState()
		if len(code) != 5 {
			return false
		}
		switch code[:2] {
		case "08", "57", "58", "XX":
			return false
		}
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "commit unexpectedly resulted in rollback" {
			return true
		}
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) && strings.Contains(reflect.TypeOf(lite).String(), "sqlite") {
		switch lite.Code() & 0xff {
		case 5, 6, 7, 8, 9, 13, 19: // BUSY, LOCKED, NOMEM, READONLY, INTERRUPT, FULL, CONSTRAINT
			return true
		}
	}
	return false
}

// discard closes conn and keeps database/sql from reusing it: its
// transaction's state is unknown.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	conn.Close()
}
