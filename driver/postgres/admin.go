package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/driver"
)

// The operator's primitives: the optional interfaces the admin surface and
// the CLI use to delete and find rows and to cancel runs.
var (
	_ driver.RowDeleter     = (*Driver)(nil)
	_ driver.IdleRowDeleter = (*Driver)(nil)
	_ driver.RowFinder      = (*Driver)(nil)
	_ driver.RunCanceller   = (*Driver)(nil)
	_ driver.RunResumer     = (*Driver)(nil)
)

// Delete implements driver.RowDeleter: one DELETE by primary key.
func (d *Driver) Delete(ctx context.Context, key driver.Key) error {
	if err := d.check(); err != nil {
		return err
	}
	tag, err := d.pool.Exec(ctx, d.sql(`DELETE FROM {s}.oke_idempotency WHERE `+keyWhere),
		key.Tenant, key.Principal, key.Flow, key.Key)
	if err != nil {
		return d.wrap("delete row", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: delete row: %w", driver.ErrNotFound)
	}
	return nil
}

// DeleteIdle implements driver.IdleRowDeleter: one DELETE whose WHERE
// leaves a row a live lease holds (on the server's now()); a concurrent
// claim's update of the row makes it wait and decide on the new version.
// When it deleted nothing, a look-up says why (no row, or held); a row that
// lapsed in between is tried again, a few times.
func (d *Driver) DeleteIdle(ctx context.Context, key driver.Key) (driver.Row, bool, error) {
	if err := d.check(); err != nil {
		return driver.Row{}, false, err
	}
	for attempt := 1; ; attempt++ {
		if attempt > 5 {
			return driver.Row{}, false, fmt.Errorf("postgres: delete idle row: it changed under each of 5 tries; try again: %w", driver.ErrUnavailable)
		}
		tag, err := d.pool.Exec(ctx, d.sql(`DELETE FROM {s}.oke_idempotency WHERE `+keyWhere+`
			AND NOT (state = 1 AND lease_until > now())`), key.Tenant, key.Principal, key.Flow, key.Key)
		if err != nil {
			return driver.Row{}, false, d.wrap("delete idle row", err)
		}
		if tag.RowsAffected() == 1 {
			return driver.Row{}, false, nil
		}
		var s rowScan
		var held bool
		err = d.pool.QueryRow(ctx, d.sql(`SELECT `+rowCols+`, (state = 1 AND lease_until > now()) FROM {s}.oke_idempotency WHERE `+keyWhere),
			key.Tenant, key.Principal, key.Flow, key.Key).Scan(append(s.dest(), &held)...)
		if err != nil {
			return driver.Row{}, false, d.wrap("delete idle row", err)
		}
		if held {
			r, _ := s.row()
			return r, true, nil
		}
	}
}

// FindRows implements driver.RowFinder. With the whole scope given it reads
// the primary key; otherwise it reads the rows with that key through the
// primary key's prefix when the tenant (and principal) are given, and by a
// scan of oke_idempotency when they are not: no index on the key alone,
// which would cost every claim an index write for an operator's rare
// look-up.
func (d *Driver) FindRows(ctx context.Context, key driver.Key, limit int) ([]driver.Row, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.sql(`SELECT `+rowCols+` FROM {s}.oke_idempotency
		WHERE idem_key = $1 AND ($2 = '' OR tenant = $2) AND ($3 = '' OR principal = $3) AND ($4 = '' OR flow = $4)
		ORDER BY tenant, principal, flow, idem_key LIMIT $5`),
		key.Key, key.Tenant, key.Principal, key.Flow, limitArg(limit))
	if err != nil {
		return nil, d.wrap("find rows", err)
	}
	defer rows.Close()
	var out []driver.Row
	for rows.Next() {
		var s rowScan
		if err := rows.Scan(s.dest()...); err != nil {
			return nil, d.wrap("find rows", err)
		}
		r, _ := s.row()
		out = append(out, r)
	}
	return out, d.wrap("find rows", rows.Err())
}

// CancelRun implements driver.RunCanceller: one UPDATE that fails the run
// only if it is unfinished and no live lease (by the database's now())
// holds it; when it updated nothing, the same statement says why.
func (d *Driver) CancelRun(ctx context.Context, id string, result driver.Response, msg string) (driver.Run, error) {
	if err := d.check(); err != nil {
		return driver.Run{}, err
	}
	body := result.Body
	if body == nil {
		body = []byte{}
	}
	var s runScan
	var exists, finished bool
	var steps int
	err := d.pool.QueryRow(ctx, d.sql(`WITH u AS (
			UPDATE {s}.oke_runs r SET status = 4, owner = '', lease_until = NULL, wake_at = NULL,
				error = $2, result_status = $3, result_content_type = $4, result_location = $5,
				result_body = $6, updated_at = now()
			WHERE r.id = $1 AND r.status IN (1, 2, 5) AND (r.owner = '' OR r.lease_until <= now())
			RETURNING `+runColumns("r")+`
		), cur AS (
			SELECT status FROM {s}.oke_runs WHERE id = $1
		)
		SELECT `+runColumns("u")+`,
			(SELECT count(*) FROM {s}.oke_steps s WHERE s.run_id = $1),
			EXISTS (SELECT 1 FROM cur), coalesce((SELECT status IN (3, 4) FROM cur), false)
		FROM (VALUES (1)) AS one LEFT JOIN u ON true`),
		id, msg, result.Status, result.ContentType, result.Location, body).
		Scan(append(s.dest(), &steps, &exists, &finished)...)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	if err != nil {
		return driver.Run{}, d.wrap("cancel run", err)
	}
	r, ok := s.run()
	switch {
	case ok:
		r.Steps = steps
		return r, nil
	case !exists:
		return driver.Run{}, fmt.Errorf("postgres: cancel run %q: %w", id, driver.ErrNotFound)
	case finished:
		return driver.Run{}, fmt.Errorf("postgres: cancel run %q: %w", id, driver.ErrRunFinished)
	default:
		return driver.Run{}, fmt.Errorf("postgres: cancel run %q: %w", id, driver.ErrRunHeld)
	}
}

// ResumeRun implements driver.RunResumer: one UPDATE of a dead run, which
// sends the wake-up notification in the same statement (the run is due now,
// for any instance); when it updated nothing, the same statement says why.
func (d *Driver) ResumeRun(ctx context.Context, id string) (driver.Run, error) {
	if err := d.check(); err != nil {
		return driver.Run{}, err
	}
	var s runScan
	var exists, notified bool
	var steps int
	err := d.pool.QueryRow(ctx, d.sql(`WITH u AS (
			UPDATE {s}.oke_runs r SET status = 1, owner = '', lease_until = NULL, wake_at = now(),
				strikes = 0, next_attempts = 0, updated_at = now()
			WHERE r.id = $1 AND r.status = 5
			RETURNING `+runColumns("r")+`
		)
		SELECT `+runColumns("u")+`,
			(SELECT count(*) FROM {s}.oke_steps s WHERE s.run_id = $1),
			EXISTS (SELECT 1 FROM {s}.oke_runs WHERE id = $1),
			CASE WHEN u.id IS NOT NULL THEN `+notifySQL("$2")+` ELSE false END
		FROM (VALUES (1)) AS one LEFT JOIN u ON true`),
		id, d.channel).Scan(append(s.dest(), &steps, &exists, &notified)...)
	if err != nil {
		return driver.Run{}, d.wrap("resume run", err)
	}
	r, ok := s.run()
	switch {
	case ok:
		r.Steps = steps
		return r, nil
	case !exists:
		return driver.Run{}, fmt.Errorf("postgres: resume run %q: %w", id, driver.ErrNotFound)
	default:
		return driver.Run{}, fmt.Errorf("postgres: resume run %q: %w", id, driver.ErrRunNotDead)
	}
}
