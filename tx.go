package oke

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/flowtx"
	"github.com/okengine/oke/internal/idem"
	"github.com/okengine/oke/internal/journal"
)

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
// lapsed) cannot commit: its writes are rolled back and it answers what the
// key's row holds now (the other attempt's response, or 409 while it runs).
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
		if st := runFrom(ctx); st != nil && inParallelStep(ctx, st) {
			return nil, fmt.Errorf("oke: flow %s: Fx.Tx in step %q, started with oke.Go: steps that run at the same time cannot share the flow's transaction; write through fx.Store, or make it a plain oke.Step", fx.flow.name, step.name)
		}
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
	return &Tx{fx: fx, tx: root.tx.Queryer(), pending: root.tx}, nil
}

// beginTx opens a flow's transaction (flowtx.Begin): on the driver's
// database when it is a driver.TxDriver, else on Config.DB. A deferred
// claim, if the flow has one, goes with its first statement
// (driver.TxClaimer).
func (a *App) beginTx(ctx context.Context, flow string, claim *idem.Deferred) (*flowtx.Tx, error) {
	var ticket driver.ClaimTicket
	if claim != nil {
		ticket = claim
	}
	t, err := flowtx.Begin(ctx, a.cfg.Driver, a.cfg.DB, ticket, ErrNoDatabase, a.cfg.StoreTimeout)
	if err != nil {
		return nil, fmt.Errorf("flow %s: %w", flow, err)
	}
	return t, nil
}

// commitTx commits t and records its effects on fx, whatever the error (a
// failed commit may have committed).
func commitTx(t *flowtx.Tx, fx *Fx) error {
	bits, err := t.Commit()
	fx.recordBits(bits)
	return err
}

// commitTxWith ends a joined t with end (which stores the outcome and
// commits) and records the effects that may have happened on fx.
func commitTxWith(t *flowtx.Tx, fx *Fx, end func(conn *sql.Conn) error) error {
	bits, err := t.CommitWith(end)
	fx.recordBits(bits)
	return err
}

// takeTx detaches fx's transaction, if one was opened, for the caller to end.
func (fx *Fx) takeTx() *flowtx.Tx {
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
	if co := st.fx.co; co != nil {
		return co.openTx(ctx, fx) // every step's writes in the run's one transaction
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
	return &Tx{fx: fx, tx: st.tx.Queryer(), pending: st.tx}, nil
}

// saveWithTx saves a step whose function succeeded with its transaction tx
// open. On the store's own database the step's result is saved in tx and
// commits with the step's writes; elsewhere tx commits first and the result
// is saved after (a crash between the two runs the step again).
func (st *runState) saveWithTx(ctx context.Context, p journal.Pending, result []byte, tx *flowtx.Tx) error {
	if !tx.Joined() {
		if err := commitTx(tx, st.fx); err != nil {
			return err // not saved: the step runs again on the next attempt
		}
		return st.x.Save(ctx, p, result, nil)
	}
	td := st.fx.app.cfg.Driver.(driver.TxDriver)
	return st.x.SaveIn(ctx, p, result, nil, func(ctx context.Context, id, owner string, step driver.Step) error {
		return commitTxWith(tx, st.fx, func(conn *sql.Conn) error {
			return td.CommitStep(ctx, conn, id, owner, step) // ctx: SaveIn's, bounded, without cancel
		})
	})
}

// endStepTx rolls back a step's transaction that its step never ended (the
// step's function panicked).
func (st *runState) endStepTx() {
	if st.tx != nil {
		st.tx.Rollback()
		st.tx, st.txStep = nil, nil
	}
}
