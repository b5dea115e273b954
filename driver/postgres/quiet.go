package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/internal/deadline"
)

// The store calls oke makes on every request (a claim, a replay's read, a
// completion) run on a pooled connection with the call's deadline tied to
// the connection's socket (deadline.Attach) rather than given to pgx as a
// context to watch: pgx watches each query's context with a channel and a
// context.AfterFunc, which cost a replay about a tenth of its CPU in the
// driver. A call whose deadline passes has its socket's deadline set to
// the past; pgx sees the read fail and closes the connection, as it would
// for a cancelled context, and the caller's error is marked
// deadline.ErrTimeout. A context that is not oke's (a caller's own) is
// watched by pgx as before.

// queryRow is d.pool.QueryRow(ctx, sql, args...).Scan(dest...).
func (d *Driver) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	c, qctx, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	err = c.QueryRow(qctx, sql, args...).Scan(dest...)
	d.release(ctx, qctx, c)
	return err
}

// exec is d.pool.Exec(ctx, sql, args...).
func (d *Driver) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, qctx, err := d.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := c.Exec(qctx, sql, args...)
	d.release(ctx, qctx, c)
	return tag, err
}

// acquire takes a connection from the pool within ctx's deadline and ties
// the deadline to its socket: qctx is the context to run the statement on
// (ctx itself when the deadline could not be tied).
func (d *Driver) acquire(ctx context.Context) (c *pgxpool.Conn, qctx context.Context, err error) {
	c, err = d.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	qctx, _ = deadline.Attach(ctx, c.Conn().PgConn().Conn())
	return c, qctx, nil
}

// release unties c's socket from ctx's deadline, if acquire tied it (qctx
// is not ctx), and gives c back to the pool, or closes it when the
// deadline cut its socket (a statement may have been ended mid-message;
// the socket's deadline is in the past).
func (d *Driver) release(ctx, qctx context.Context, c *pgxpool.Conn) {
	if qctx != ctx && deadline.Detach(ctx, c.Conn().PgConn().Conn()) {
		closeHijacked(c.Hijack())
		return
	}
	c.Release()
}

// closeHijacked closes a connection taken out of the pool. Its socket's
// deadline is in the past, so the goodbye it tries to send fails at once.
func closeHijacked(conn *pgx.Conn) {
	_ = conn.Close(context.Background())
}
