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
			d.db = openDB(d.pool)
			return
		}
		d.txPool = pool
		d.db = openDB(pool)
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
	return d.commitWith(ctx, conn, "complete in transaction", func(b *pgx.Batch) {
		b.Queue(d.sql(completeOrFailSQL), completeArgs(key, owner, resp, ttl)...)
	})
}

// CommitStep implements driver.TxDriver: SaveStep's statement in the
// transaction, then the COMMIT. saveStepSQL reports what it did rather than
// failing, so its answer is read before the commit is sent: two round trips.
func (d *Driver) CommitStep(ctx context.Context, conn *sql.Conn, id, owner string, step driver.Step) error {
	if err := d.check(); err != nil {
		return err
	}
	var saved, held bool
	err := conn.QueryRowContext(ctx, d.sql(saveStepSQL), saveStepArgs(id, owner, step)...).Scan(&saved, &held)
	if err = d.savedStep(id, step.Seq, saved, held, err); err != nil {
		if errors.Is(err, driver.ErrNotOwner) || errors.Is(err, driver.ErrStepOrder) {
			if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
				return d.wrap("save step in transaction", rerr)
			}
		}
		return err
	}
	return d.commitWith(ctx, conn, "save step in transaction", func(*pgx.Batch) {})
}

// commitWith sends the statements queue adds and a COMMIT as one pipeline
// on conn's pgx connection. A failed first statement whose error says the
// row was not held (division by zero, see completeOrFailSQL) is ErrNotOwner,
// after a ROLLBACK.
func (d *Driver) commitWith(ctx context.Context, conn *sql.Conn, op string, queue func(*pgx.Batch)) error {
	return conn.Raw(func(dc any) error {
		lc, ok := dc.(*lazyConn)
		if !ok {
			return fmt.Errorf("postgres: %s: the connection is a %T, not one of the driver's DB", op, dc)
		}
		c := lc.Conn.Conn()
		b := &pgx.Batch{}
		if lc.pending {
			// The flow sent nothing in its transaction: it begins here.
			lc.pending = false
			b.Queue("BEGIN")
		}
		queue(b)
		n := b.Len()
		b.Queue("COMMIT")
		br := c.SendBatch(ctx, b)
		var first error
		for i := 0; i <= n; i++ {
			if _, err := br.Exec(); err != nil && first == nil {
				first = err
			}
		}
		if err := br.Close(); err != nil && first == nil {
			first = err
		}
		var pgErr *pgconn.PgError
		if errors.As(first, &pgErr) && pgErr.Code == "22012" {
			// The fenced statement stored nothing: the server skipped the
			// COMMIT and the transaction is aborted.
			if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
				return d.wrap(op, err)
			}
			return fmt.Errorf("postgres: %s: %w", op, driver.ErrNotOwner)
		}
		if first != nil {
			return d.wrap(op, first)
		}
		return nil
	})
}

// Unavailable implements driver.TxDriver with the driver's one error
// translation: what it calls driver.ErrUnavailable.
func (d *Driver) Unavailable(err error) bool {
	return err != nil && errors.Is(d.wrap("", err), driver.ErrUnavailable)
}
