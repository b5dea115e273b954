package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

// The store calls oke makes on every request (a claim, a replay's read, a
// completion) run on a pooled connection with the call's deadline tied to
// the connection's socket (pgpipe.TieDeadline, deadline.Attach) rather
// than given to pgx as a context to watch: pgx watches each query's
// context with a channel and a context.AfterFunc, about 3.7 µs of a
// replay's ~95 µs of CPU (docs/BENCHMARKS.md §22). A call whose deadline
// passes has its socket's deadline set to the past; pgx sees the read fail
// and closes the connection, as it would for a cancelled context, and the
// caller's error is marked deadline.ErrTimeout. A context that is not
// oke's (a caller's own) is watched by pgx as before.

// queryRow is d.pool.QueryRow(ctx, sql, args...).Scan(dest...).
func (d *Driver) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	c, err := d.pool.Acquire(ctx) // within ctx's deadline
	if err != nil {
		return err
	}
	qctx, tie := pgpipe.TieDeadline(ctx, c.Conn())
	err = c.QueryRow(qctx, sql, args...).Scan(dest...)
	tie.Untie()
	c.Release() // a connection Untie closed is destroyed, not pooled
	return err
}

// exec is d.pool.Exec(ctx, sql, args...).
func (d *Driver) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	qctx, tie := pgpipe.TieDeadline(ctx, c.Conn())
	tag, err := c.Exec(qctx, sql, args...)
	tie.Untie()
	c.Release()
	return tag, err
}
