package postgres

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/okengine/oke/driver"
)

// errUnique marks a unique violation the caller did not expect to handle.
var errUnique = errors.New("unique violation")

// wrap translates a pgx, database/sql or Postgres error into the driver's
// sentinels. It is the one place that knows those error values:
//
//   - pgx.ErrNoRows, sql.ErrNoRows → driver.ErrNotFound
//   - a closed driver → driver.ErrClosed
//   - a cancelled or timed-out context stays what it is
//   - connection failures (also database/sql's ErrBadConn and ErrConnDone),
//     server shutdown, too many connections, and
//     serialization failures or deadlocks → driver.ErrUnavailable (the
//     operation may or may not have happened; callers fail closed, and may
//     retry when pgconn.SafeToRetry says nothing was sent)
//   - unique violations → errUnique (callers that expect one check first)
//
// Anything else (a bug in a query, a refused value such as invalid UTF-8) is
// returned wrapped as it is.
func (d *Driver) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if d.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, driver.ErrClosed)
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("postgres: %s: %w", op, driver.ErrNotFound)
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		// No connection could be made, whatever the cause (refused, reset,
		// the connect timeout): the server could not be reached.
		return fmt.Errorf("postgres: %s: %w: %w", op, driver.ErrUnavailable, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("postgres: %s: %w: %w", op, errUnique, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, cannot connect now
			pgErr.Code == "53300",                        // too many connections
			pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return fmt.Errorf("postgres: %s: %w: %w", op, driver.ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || pgconn.Timeout(err) ||
		pgconn.SafeToRetry(err) || isConnClosed(err) ||
		errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("postgres: %s: %w: %w", op, driver.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// isConnClosed recognises pgx's errors for a connection or pool that is gone,
// which pgx does not export as values.
func isConnClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "conn closed") || strings.Contains(s, "closed pool") ||
		strings.Contains(s, "unexpected EOF") || strings.Contains(s, "connection reset")
}
