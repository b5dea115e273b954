package driver

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ErrNotCommitted is what a commit returns, wrapped, when its error proves
// that the transaction did not commit: the database answered the COMMIT
// (or a statement before it, which the COMMIT then never ran behind) with
// an error and rolled the transaction back — a deferred constraint, a
// serialization failure, a disk full. Nothing the transaction wrote
// happened, and the same work may run again. A commit whose answer never
// came (a connection lost, a timeout) is not this error: it may have
// committed.
var ErrNotCommitted = errors.New("driver: the transaction did not commit")

// TxDriver is implemented by a driver that keeps its rows in a SQL database
// a flow can write its own tables to. oke then opens a flow's transaction
// (oke.Fx.Tx) on that database and stores the flow's outcome in the same
// transaction: the flow's writes and the stored response (or a durable
// step's saved result) commit together or not at all. That is what makes
// writes to the same database exactly-once, where writes anywhere else are
// at-least-once.
//
// The flow's transaction is opened by Begin on a connection of DB (a
// *sql.Conn), so that the driver may begin and end it its own way: Begin
// may defer the BEGIN to the first statement and send both in one round
// trip; the commit methods store the outcome in it, fenced like their plain
// counterparts, and commit it — in one round trip where the driver can
// pipeline. Nothing they write is durable unless that commit happens. The
// caller ends a transaction it does not commit that way by sending
// ROLLBACK (or COMMIT) on conn.
type TxDriver interface {
	Driver
	// DB returns a database/sql handle on the driver's database. The driver
	// owns it: callers must not close it.
	DB() *sql.DB
	// Begin opens a transaction on conn, a connection of DB. It may send
	// nothing yet: the BEGIN then goes with the first statement sent on
	// conn, and a COMMIT or ROLLBACK sent before any statement ends the
	// transaction without a round trip.
	Begin(ctx context.Context, conn *sql.Conn) error
	// CommitComplete is Complete inside the transaction open on conn,
	// followed by its commit. ErrNotOwner: owner no longer holds the row;
	// nothing was stored and the transaction was rolled back.
	// ErrNotCommitted: the database answered that the transaction did not
	// commit (a deferred constraint, a serialization failure, a full disk):
	// nothing of it happened. Any other error: it is unknown whether the
	// transaction committed. After an error other than ErrNotOwner the
	// caller must not reuse conn (discard it).
	CommitComplete(ctx context.Context, conn *sql.Conn, key Key, owner string, resp Response, ttl time.Duration) error
	// CommitStep is Journal.SaveStep inside the transaction open on conn,
	// followed by its commit; errors as for CommitComplete (ErrNotOwner,
	// ErrStepOrder: rolled back, nothing saved; ErrNotCommitted).
	CommitStep(ctx context.Context, conn *sql.Conn, id, owner string, step Step) error
	// Unavailable reports whether err — from a statement a flow sent on
	// DB's connections, possibly wrapped — means the database could not be
	// reached (a lost connection, a server shutting down), as opposed to
	// a fault of the statement. oke then answers 503, not 500.
	Unavailable(err error) bool
}

// ClaimTicket is an Idempotency-Key claim that a flow's transaction may
// carry (TxClaimer): the claim is not made when the request arrives but
// with the flow's first statement in its transaction, in the same round
// trip. The claim state machine (oke's) implements it.
type ClaimTicket interface {
	// Take hands the claim to the driver to send now. ok is false when the
	// claim was made already: err is then nil if it went to this request
	// (the transaction begins as with Begin), or what the statement must
	// return if it did not (the transaction must not begin).
	Take() (req ClaimRequest, ok bool, err error)
	// Done is told the result of a claim taken with Take, or the error that
	// kept it from being read. It returns nil when the request holds the
	// key, else the error the statement must return.
	Done(res ClaimResult, err error) error
}

// TxClaimer is a TxDriver that can hold an Idempotency-Key claim in a
// flow's transaction, made in one round trip with its first statement
// (oke.ClaimInTx).
type TxClaimer interface {
	TxDriver
	// BeginClaimed is Begin with t's claim made in the transaction. With
	// the first statement on conn the driver takes the claim (Take) and
	// makes it inside the flow's transaction, ahead of the statement, in
	// one round trip; the statement runs only when the claim went to this
	// request. The driver tells t the claim's result (Done) before it
	// returns the statement's. When the claim did not go to this request,
	// no transaction is open, and that statement and every later one on
	// conn return Done's error, except a COMMIT or ROLLBACK, which ends
	// nothing and succeeds.
	//
	// A claim held this way is reported with ClaimResult.InTx, and no row
	// exists until the transaction commits with the response
	// (CommitComplete, which must then store the response whether or not
	// a row exists). While the transaction is open, no other claim of the
	// key may succeed, and another request's claim of it is Busy; once it
	// ends any other way, the key is free. When the driver cannot hold it
	// (for this connection or statement), it makes the claim as Claim
	// does, on its own, and the transaction begins after it.
	BeginClaimed(ctx context.Context, conn *sql.Conn, t ClaimTicket) error
}

// RunCommitter is a TxDriver that writes a whole durable run in a flow's
// transaction: its row and its saved steps, with the Idempotency-Key's
// completion and the commit, in one round trip. oke runs a durable flow
// whose every non-read effect is a statement in that transaction (the
// contract's txOnly) this way: its steps and their journal entries commit
// once, together — a crash rolls them all back, and a retry runs them again
// from the start, which is exactly once since nothing outside the
// database happened. This interface is not stable yet.
type RunCommitter interface {
	TxDriver
	// CommitRun inserts run — unowned, with its Status (RunCompleted,
	// RunFailed, or RunSleeping until WakeAt), Result, Error, IdemKey,
	// Attempts 1 — and steps, in the transaction open on conn; then, when
	// key is not nil, does what CommitComplete does (fenced by owner, the
	// key's completion with resp for ttl), and commits. Errors as for
	// CommitComplete; a taken run ID is an error, and nothing is
	// committed. A sleeping run is announced to the scheduler (Notifier).
	CommitRun(ctx context.Context, conn *sql.Conn, key *Key, owner string, resp Response, ttl time.Duration, run Run, steps []Step) error
}
