package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver"
)

var _ driver.TxDriver = (*Driver)(nil)

// DB implements driver.TxDriver: a database/sql handle (pgx's stdlib
// adapter) on a second pool with the driver pool's settings. Flows hold its
// connections for the length of their transaction while the driver's own
// statements (claims, runs an Emit starts, …) take short turns on the first:
// one shared pool could fill up with flows that each wait for a connection
// to do driver work. A transaction Begin opens on one of its connections
// sends its BEGIN with its first statement (see lazytx.go); otherwise its
// connections are pgx's. The driver closes it on Close.
func (d *Driver) DB() *sql.DB {
	d.dbOnce.Do(func() {
		pool, err := pgxpool.NewWithConfig(context.Background(), d.pool.Config())
		if err != nil {
			// Unreachable: the config made the first pool, and connecting
			// is lazy. Share the first pool rather than fail.
			d.db = openDB(d, d.pool)
			return
		}
		d.txPool = pool
		d.db = openDB(d, pool)
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
	return d.commitWith(ctx, conn, "complete in transaction", driver.ErrNotOwner, notice, func(lc *lazyConn) (string, []any) {
		if h := lc.held; h != nil && h.owner == owner && h.key == key {
			// The claim is the transaction's: the response is its row.
			return h.completion(d, resp, ttl)
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
	return d.commitWith(ctx, conn, "save step in transaction", driver.ErrStepOrder, "", func(*lazyConn) (string, []any) {
		return d.sql(saveStepOrFailSQL), saveStepArgs(id, owner, step)
	})
}

// commitWith sends the fenced statement stmt gives and a COMMIT as one
// pipeline on conn's pgx connection (behind the BEGIN, if the flow sent
// nothing in its transaction). When the statement refuses — its errors say
// why: see completeOrFailSQL and saveStepOrFailSQL; a unique violation is
// dup (a concurrent save of the same step, or a claim made without the lock
// of a held one: insertCompletedSQL) — the server skips the COMMIT; the
// transaction is rolled back and the driver's error (ErrNotOwner,
// ErrStepOrder) returned. A notice that is not empty is sent on
// WaitChannel between the statement and the COMMIT, in the same pipeline:
// skipped with the COMMIT when the statement refuses.
func (d *Driver) commitWith(ctx context.Context, conn *sql.Conn, op string, dup error, notice string, stmt func(*lazyConn) (string, []any)) error {
	return conn.Raw(func(dc any) error {
		lc, ok := dc.(*lazyConn)
		if !ok {
			return fmt.Errorf("postgres: %s: the connection is a %T, not one of the driver's DB", op, dc)
		}
		q, args := stmt(lc)
		lc.held = nil // the transaction ends here
		c := lc.Conn.Conn()
		b := &pgx.Batch{}
		if lc.pending {
			// The flow sent nothing in its transaction: it begins here.
			lc.pending = false
			b.Queue("BEGIN")
		}
		b.Queue(q, args...)
		if notice != "" {
			b.Queue(`SELECT pg_notify($1, $2)`, d.waitChannel(), notice)
		}
		b.Queue("COMMIT")
		br := c.SendBatch(ctx, b)
		var first error
		for range b.Len() {
			if _, err := br.Exec(); err != nil && first == nil {
				first = err
			}
		}
		if err := br.Close(); err != nil && first == nil {
			first = err
		}
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
			case "23505": // a unique violation
				refused = dup
			}
		}
		if refused == nil {
			return d.wrap(op, first)
		}
		if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
			return d.wrap(op, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, refused)
	})
}

// Unavailable implements driver.TxDriver with the driver's one error
// translation: what it calls driver.ErrUnavailable.
func (d *Driver) Unavailable(err error) bool {
	return err != nil && errors.Is(d.wrap("", err), driver.ErrUnavailable)
}
