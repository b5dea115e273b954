package oke

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/journal"
)

// flowTx is a flow's transaction: opened by Fx.Tx on first use, ended by oke
// once the flow returns.
type flowTx struct {
	tx   *sql.Tx   // on Config.DB: a database/sql transaction
	conn *sql.Conn // joined: a connection the driver began, ended by the driver
	// effects of its statements, recorded on the flow once it commits (or
	// may have): rolled-back writes changed nothing.
	effects atomic.Uint32
}

// Tx returns the flow's transaction, opening it on first use; later calls in
// the same flow (also from flows it Calls) return the same transaction. oke
// ends it: it commits when the flow succeeds and rolls back when the flow
// returns an error (a declared failure too). Do not commit or roll it back
// yourself.
//
// On a driver that keeps its rows in the same SQL database (driver/postgres)
// the transaction is where oke stores the outcome too: the flow's writes and
// the stored response of its Idempotency-Key commit together or not at all.
// A crash can then never leave a written row without its stored response,
// and a retry replays instead of writing again — writes to that database
// happen exactly once. An attempt that lost its key to another (its lease
// lapsed) cannot commit: its writes are rolled back and it answers 409.
//
// On other drivers the transaction is on Config.DB and commits before the
// response is stored: a crash between the two runs the flow again on retry
// (at least once), as do writes to any other system. See docs/idempotency.md.
//
// Tx is for unary flows. In a durable flow, open it inside a step: the
// step's writes and its saved result commit together.
func (fx *Fx) Tx(ctx context.Context) (*Tx, error) {
	root := fx
	for root.parent != nil {
		root = root.parent
	}
	if step := stepFrom(ctx); step != nil {
		return step.openTx(ctx, fx)
	}
	if root.run != nil {
		return nil, fmt.Errorf("oke: flow %s: Fx.Tx outside a step of a durable flow: open it inside oke.Step, where its writes commit with the step's saved result", fx.flow.name)
	}
	if root.flow.shape != shapeUnary {
		return nil, fmt.Errorf("oke: flow %s: Fx.Tx is for unary flows, not streams", fx.flow.name)
	}
	root.txMu.Lock()
	defer root.txMu.Unlock()
	if root.tx == nil {
		t, err := fx.app.beginTx(ctx, fx.flow.name, root.claim)
		if err != nil {
			return nil, err
		}
		root.tx = t
	}
	return &Tx{fx: fx, tx: root.tx.queryer(), pending: root.tx}, nil
}

// beginTx opens a flow's transaction. It outlives the flow's context (the
// flow's timeout must not roll it back once the flow returned), so it is
// begun on a context without the flow's cancellation. A deferred claim, if
// the flow has one, goes with its first statement (driver.TxClaimer).
func (a *App) beginTx(ctx context.Context, flow string, claim *idem.Deferred) (*flowTx, error) {
	var (
		db     = a.cfg.DB
		joined bool
	)
	if d, ok := a.cfg.Driver.(driver.TxDriver); ok {
		db, joined = d.DB(), true
	}
	if db == nil {
		return nil, fmt.Errorf("flow %s: %w", flow, ErrNoDatabase)
	}
	ctx = context.WithoutCancel(ctx)
	if !joined {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("flow %s: begin transaction: %w", flow, err)
		}
		return &flowTx{tx: tx}, nil
	}
	// On the driver's database the transaction is the driver's Begin on a
	// connection of its own, so that the driver can begin it with the
	// flow's first statement and store the outcome and commit in one go
	// (driver.TxDriver).
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("flow %s: begin transaction: %w", flow, err)
	}
	if tc, ok := a.cfg.Driver.(driver.TxClaimer); ok && claim != nil {
		err = tc.BeginClaimed(ctx, conn, claim)
	} else {
		err = a.cfg.Driver.(driver.TxDriver).Begin(ctx, conn)
	}
	if err != nil {
		discard(conn)
		return nil, fmt.Errorf("flow %s: begin transaction: %w", flow, err)
	}
	return &flowTx{conn: conn}, nil
}

// joined reports whether t is on the driver's own database (a
// driver.TxDriver): the flow's outcome (its stored response, or a step's
// saved result) is then written in t before it commits.
func (t *flowTx) joined() bool { return t.conn != nil }

// queryer returns where the flow's statements go.
func (t *flowTx) queryer() queryer {
	if t.tx != nil {
		return t.tx
	}
	return t.conn
}

// queryer is what the flow's statements go to: a *sql.Tx or a *sql.Conn.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// discard closes conn and keeps database/sql from reusing it: its
// transaction's state is unknown.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return sqldriver.ErrBadConn })
	conn.Close()
}

// rollback ends t without its writes.
func (t *flowTx) rollback() {
	if t == nil {
		return
	}
	if t.tx != nil {
		t.tx.Rollback()
		return
	}
	if _, err := t.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		discard(t.conn)
		return
	}
	t.conn.Close()
}

// commit commits t and records its effects on fx. A failed commit may still
// have committed (the connection can break after the server did), so the
// effects are recorded either way: erring that way never runs a flow twice.
func (t *flowTx) commit(fx *Fx) error {
	return t.commitWith(fx, func(conn *sql.Conn) error {
		_, err := conn.ExecContext(context.Background(), "COMMIT")
		return err
	})
}

// commitWith ends a joined t with end, which stores the flow's outcome in it
// and commits (driver.TxDriver), or commits a transaction on Config.DB. Its
// effects are recorded unless end reports that it rolled back (ErrNotOwner,
// ErrStepOrder).
func (t *flowTx) commitWith(fx *Fx, end func(conn *sql.Conn) error) error {
	var err error
	if t.tx != nil {
		err = t.tx.Commit()
	} else {
		err = end(t.conn)
		switch {
		case err == nil:
			t.conn.Close()
		case errors.Is(err, driver.ErrNotOwner) || errors.Is(err, driver.ErrStepOrder):
			t.conn.Close() // rolled back: nothing happened
			return err
		default:
			discard(t.conn)
		}
	}
	fx.recordBits(t.effects.Load())
	if err != nil {
		return fmt.Errorf("commit the flow's transaction: %w", err)
	}
	return nil
}

// takeTx detaches fx's transaction, if one was opened, for the caller to end.
func (fx *Fx) takeTx() *flowTx {
	fx.txMu.Lock()
	defer fx.txMu.Unlock()
	t := fx.tx
	fx.tx = nil
	return t
}

// openTx returns the transaction of the step s, opening it on first use.
func (s *stepCtx) openTx(ctx context.Context, fx *Fx) (*Tx, error) {
	st := runFrom(s.parent)
	if st == nil { // Step in a flow that is not durable: no journal to join
		return nil, fmt.Errorf("oke: flow %s: Fx.Tx inside oke.Step of a flow that is not durable: call it outside the step", fx.flow.name)
	}
	if st.tx != nil && st.txStep != s {
		return nil, fmt.Errorf("oke: flow %s: Fx.Tx in step %q while step %q holds a transaction: steps inside steps cannot open their own", fx.flow.name, s.name, st.txStep.name)
	}
	if st.tx == nil {
		t, err := fx.app.beginTx(ctx, fx.flow.name, nil)
		if err != nil {
			return nil, err
		}
		st.tx, st.txStep = t, s
	}
	return &Tx{fx: fx, tx: st.tx.queryer(), pending: st.tx}, nil
}

// saveWithTx saves a step whose function succeeded with its transaction tx
// open. On the store's own database the step's result is saved in tx and
// commits with the step's writes; elsewhere tx commits first and the result
// is saved after (a crash between the two runs the step again).
func (st *runState) saveWithTx(ctx context.Context, p journal.Pending, result []byte, tx *flowTx) error {
	if !tx.joined() {
		if err := tx.commit(st.fx); err != nil {
			return err // not saved: the step runs again on the next attempt
		}
		return st.x.Save(ctx, p, result, nil)
	}
	td := st.fx.app.cfg.Driver.(driver.TxDriver)
	return st.x.SaveIn(ctx, p, result, nil, func(ctx context.Context, id, owner string, step driver.Step) error {
		return tx.commitWith(st.fx, func(conn *sql.Conn) error {
			return td.CommitStep(context.WithoutCancel(ctx), conn, id, owner, step)
		})
	})
}

// endStepTx rolls back a step's transaction that its step never ended (the
// step's function panicked).
func (st *runState) endStepTx() {
	if st.tx != nil {
		st.tx.rollback()
		st.tx, st.txStep = nil, nil
	}
}
