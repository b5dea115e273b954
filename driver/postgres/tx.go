package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/okengine/oke/driver"
)

var _ driver.TxDriver = (*Driver)(nil)

// DB implements driver.TxDriver: a database/sql handle (pgx's stdlib
// adapter) on a second pool with the driver pool's settings. Flows hold its
// connections for the length of their transaction while the driver's own
// statements (claims, runs an Emit starts, …) take short turns on the first:
// one shared pool could fill up with flows that each wait for a connection
// to do driver work. The driver closes it on Close.
func (d *Driver) DB() *sql.DB {
	d.dbOnce.Do(func() {
		pool, err := pgxpool.NewWithConfig(context.Background(), d.pool.Config())
		if err != nil {
			// Unreachable: the config made the first pool, and connecting
			// is lazy. Share the first pool rather than fail.
			d.db = stdlib.OpenDBFromPool(d.pool)
			return
		}
		d.txPool = pool
		d.db = stdlib.OpenDBFromPool(pool)
	})
	return d.db
}

// CompleteTx implements driver.TxDriver: Complete's statement inside tx.
// The response is stored when tx commits, together with the flow's writes.
func (d *Driver) CompleteTx(ctx context.Context, tx *sql.Tx, key driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if err := d.check(); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, d.sql(completeSQL), completeArgs(key, owner, resp, ttl)...)
	if err != nil {
		return d.wrap("complete in transaction", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return d.wrap("complete in transaction", err)
	} else if n == 0 {
		return fmt.Errorf("postgres: complete in transaction: %w", driver.ErrNotOwner)
	}
	return nil
}

// SaveStepTx implements driver.TxDriver: SaveStep's statement inside tx.
// The step is saved when tx commits, together with the step's writes.
func (d *Driver) SaveStepTx(ctx context.Context, tx *sql.Tx, id, owner string, step driver.Step) error {
	if err := d.check(); err != nil {
		return err
	}
	var saved, held bool
	err := tx.QueryRowContext(ctx, d.sql(saveStepSQL), saveStepArgs(id, owner, step)...).Scan(&saved, &held)
	return d.savedStep(id, step.Seq, saved, held, err)
}
