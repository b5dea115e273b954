package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

var _ driver.TxDriver = (*Driver)(nil)

// A flow's transaction (oke.Fx.Tx) begins lazily: Begin only marks its
// connection, and the BEGIN goes to the server in one pipeline with the
// flow's first statement (pgpipe.Conn.BeginLazy). A live keyed charge is
// then three round trips — the claim; BEGIN with the INSERT; the completion
// with the COMMIT — where a BEGIN of its own made four. What the flow can
// see is the same: Postgres takes a transaction's snapshot at its first
// statement, not at BEGIN, and the flow sends nothing in between. One thing
// moves: now() (the transaction's timestamp) is the time of that first
// statement, not of the Fx.Tx call.
//
// A transaction begun by BeginClaimed also carries an Idempotency-Key claim
// (oke.ClaimInTx): its first statement goes in one pipeline behind the
// claim, held in the transaction (claimPrelude, a pgpipe.Prelude), and a
// live keyed charge is two round trips.

// Begin implements driver.TxDriver: it opens the flow's transaction on
// conn, a connection of DB, without a round trip — the BEGIN goes with the
// first statement sent on conn (or not at all, if the transaction ends
// before any: it then has nothing to commit or roll back).
func (d *Driver) Begin(ctx context.Context, conn *sql.Conn) error {
	return d.begin(conn, nil)
}

// BeginClaimed implements driver.TxClaimer: Begin, with t's claim sent in
// the same pipeline as the first statement, ahead of the BEGIN.
func (d *Driver) BeginClaimed(ctx context.Context, conn *sql.Conn, t driver.ClaimTicket) error {
	if t == nil {
		return d.begin(conn, nil)
	}
	return d.begin(conn, &claimPrelude{d: d, t: t})
}

func (d *Driver) begin(conn *sql.Conn, p pgpipe.Prelude) error {
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(*pgpipe.Conn)
		if !ok {
			return fmt.Errorf("postgres: begin: the connection is a %T, not one of the driver's DB", dc)
		}
		if err := pc.BeginLazy(p); err != nil {
			return fmt.Errorf("postgres: begin: %w", err)
		}
		return nil
	})
}

// DB implements driver.TxDriver: a database/sql handle (pgx's stdlib
// adapter) on a second pool with the driver pool's settings. Flows hold its
// connections for the length of their transaction while the driver's own
// statements (claims, runs an Emit starts, …) take short turns on the first:
// one shared pool could fill up with flows that each wait for a connection
// to do driver work. A transaction Begin opens on one of its connections
// sends its BEGIN with its first statement (see Begin); otherwise its
// connections are pgx's. The driver closes it on Close.
func (d *Driver) DB() *sql.DB {
	d.dbOnce.Do(func() {
		pool, err := pgxpool.NewWithConfig(context.Background(), d.pool.Config())
		if err != nil {
			// Unreachable: the config made the first pool, and connecting
			// is lazy. Share the first pool rather than fail.
			d.db = pgpipe.OpenDB(d.pool)
			return
		}
		d.txPool = pool
		d.db = pgpipe.OpenDB(pool)
	})
	return d.db
}

// completeOrFailSQL is completeSQL that fails (division by zero) when it
// stores nothing, so that a COMMIT sent behind it in the same pipeline is
// skipped by the server's error handling instead of committing the flow's
// writes without their response.
const completeOrFailSQL = `WITH u AS (` + completeSQL + ` RETURNING 1) SELECT 1 / count(*) FROM u`

// CommitComplete implements driver.TxDriver: the fenced completion and the
// COMMIT go to the server as one pipeline, one round trip.
func (d *Driver) CommitComplete(ctx context.Context, conn *sql.Conn, key driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if err := d.check(); err != nil {
		return err
	}
	// Someone waits for the key (keywait.go): the pipeline notifies them
	// before its COMMIT, so the notification goes out with the commit.
	notice, _ := d.completionNotice(key)
	return d.commitWith(ctx, conn, "complete in transaction", driver.ErrNotOwner, notice, func(pc *pgpipe.Conn) (string, []any) {
		if p, _ := pc.Prelude().(*claimPrelude); p != nil && p.held != nil && p.held.owner == owner && p.held.key == key {
			// The claim is the transaction's: the response is its row.
			return p.held.completion(d, resp, ttl)
		}
		return d.sql(completeOrFailSQL), completeArgs(key, owner, resp, ttl)
	})
}

// saveStepOrFailSQL is saveStepSQL that fails when it saves nothing, like
// completeOrFailSQL: with a division by zero (22012) when owner does not
// hold the run, and with the square root of −1 (2201F) when the step is not
// the next one. The select list is evaluated left to right, so the owner
// check comes first.
const saveStepOrFailSQL = saveStepWith + `
		SELECT 1 / ((SELECT count(*) FROM ins) + (SELECT count(*) FROM {s}.oke_runs r WHERE ` + heldSQL + `)),
			sqrt((SELECT count(*) FROM ins) - 1)`

// CommitStep implements driver.TxDriver: the fenced save of the step and the
// COMMIT go to the server as one pipeline, one round trip.
func (d *Driver) CommitStep(ctx context.Context, conn *sql.Conn, id, owner string, step driver.Step) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.commitWith(ctx, conn, "save step in transaction", driver.ErrStepOrder, "", func(*pgpipe.Conn) (string, []any) {
		return d.sql(saveStepOrFailSQL), saveStepArgs(id, owner, step)
	})
}

// commitWith sends the fenced statement stmt gives and a COMMIT as one
// pipeline on conn's pgx connection (pgpipe.Conn.Commit: behind the BEGIN,
// if the flow sent nothing in its transaction). When the statement refuses — its errors say
// why: see completeOrFailSQL and saveStepOrFailSQL; a unique violation is
// dup (a concurrent save of the same step, or a claim made without the lock
// of a held one: insertCompletedSQL) — the server skips the COMMIT; the
// transaction is rolled back and the driver's error (ErrNotOwner,
// ErrStepOrder) returned. A notice that is not empty is sent on
// WaitChannel between the statement and the COMMIT, in the same pipeline:
// skipped with the COMMIT when the statement refuses.
func (d *Driver) commitWith(ctx context.Context, conn *sql.Conn, op string, dup error, notice string, stmt func(*pgpipe.Conn) (string, []any)) error {
	return d.commitWithAll(ctx, conn, op, dup, notice, func(pc *pgpipe.Conn) []pgpipe.Statement {
		q, args := stmt(pc)
		return []pgpipe.Statement{{SQL: q, Args: args}}
	})
}

// commitWithAll is commitWith for several fenced statements, sent in order
// in the one pipeline: the first that fails decides the error.
func (d *Driver) commitWithAll(ctx context.Context, conn *sql.Conn, op string, dup error, notice string, stmt func(*pgpipe.Conn) []pgpipe.Statement) error {
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(*pgpipe.Conn)
		if !ok {
			return fmt.Errorf("postgres: %s: the connection is a %T, not one of the driver's DB", op, dc)
		}
		stmts := stmt(pc)
		if notice != "" {
			stmts = append(stmts, pgpipe.Statement{SQL: `SELECT pg_notify($1, $2)`, Args: []any{d.waitChannel(), notice}})
		}
		first := pc.Commit(ctx, stmts...)
		if first == nil {
			return nil
		}
		var refused error
		var pgErr *pgconn.PgError
		if errors.As(first, &pgErr) {
			switch pgErr.Code {
			case "22012": // division by zero: owner does not hold the row
				refused = driver.ErrNotOwner
			case "2201F": // not the next step
				refused = driver.ErrStepOrder
			case "23505": // a unique violation of oke's own rows
				// (a flow's deferred unique constraint failing at
				// COMMIT is the flow's: not committed, below)
				if pgErr.SchemaName == d.schema && strings.HasPrefix(pgErr.TableName, "oke_") {
					refused = dup
				}
			}
		}
		if refused == nil {
			if notCommitted(first) {
				return fmt.Errorf("%w: %w", driver.ErrNotCommitted, d.wrap(op, first))
			}
			return d.wrap(op, first)
		}
		if _, err := pc.Conn.Conn().Exec(ctx, "ROLLBACK"); err != nil {
			return d.wrap(op, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, refused)
	})
}

// notCommitted reports whether err, the first error of a pipeline that
// ends with a COMMIT, proves that the transaction did not commit: the
// server answered with an ERROR — for the COMMIT itself (a deferred
// constraint, a serialization failure, a full disk), which rolled the
// transaction back, or for a statement before it, behind which the server
// skipped the COMMIT — or ended the session because the transaction sat
// idle past its timeout (25P03: a claim held past its lease,
// heldclaim.go), which rolled it back. A FATAL or PANIC otherwise, a lost
// connection or a timeout may have come after the commit.
func notCommitted(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	severity := pgErr.SeverityUnlocalized
	if severity == "" {
		severity = pgErr.Severity
	}
	switch severity {
	case "ERROR":
		return true
	case "FATAL":
		return pgErr.Code == "25P03" // idle_in_transaction_session_timeout
	}
	return false
}

// Unavailable implements driver.TxDriver with the driver's one error
// translation: what it calls driver.ErrUnavailable.
func (d *Driver) Unavailable(err error) bool {
	return err != nil && errors.Is(d.wrap("", err), driver.ErrUnavailable)
}
