package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/driver"
)

var _ driver.Signaler = (*Driver)(nil)

// SendSignal implements driver.Signaler in one transaction that first locks
// the run's row (FOR UPDATE): sends to a run are serialized, and so is a
// send with the FinishRun that parks the run (an UPDATE of the same row). A
// send that finds the run sleeping makes it due now and notifies the
// schema's channel (delivered at commit), so any instance wakes it; one
// that finds it held leaves it, and the WakeForSignal after the holder's
// park — a statement that begins after the send committed, since the park
// waited for the lock — sees the signal.
func (d *Driver) SendSignal(ctx context.Context, s driver.Signal) (driver.Signal, error) {
	if err := d.check(); err != nil {
		return driver.Signal{}, err
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return driver.Signal{}, d.wrap("send signal", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var status int16
	err = tx.QueryRow(ctx, d.sql(`SELECT status FROM {s}.oke_runs WHERE id = $1 FOR UPDATE`), s.RunID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Signal{}, driver.ErrNotFound
	}
	if err != nil {
		return driver.Signal{}, d.wrap("send signal", err)
	}
	kept := driver.Signal{RunID: s.RunID}
	err = tx.QueryRow(ctx, d.sql(`SELECT seq, name, key, payload, sent_at, step FROM {s}.oke_signals
		WHERE run_id = $1 AND key = $2`), s.RunID, s.Key).
		Scan(&kept.Seq, &kept.Name, &kept.Key, &kept.Payload, &kept.SentAt, &kept.Step)
	switch {
	case err == nil:
		kept.SentAt = kept.SentAt.UTC()
		return kept, driver.ErrSignalDuplicate
	case !errors.Is(err, pgx.ErrNoRows):
		return driver.Signal{}, d.wrap("send signal", err)
	}
	if driver.RunStatus(status).Finished() {
		return driver.Signal{}, driver.ErrRunFinished
	}
	payload := s.Payload
	if payload == nil {
		payload = []byte{}
	}
	err = tx.QueryRow(ctx, d.sql(`INSERT INTO {s}.oke_signals (run_id, seq, name, key, payload, sent_at)
		SELECT $1, coalesce(max(seq), 0) + 1, $2, $3, $4, now() FROM {s}.oke_signals WHERE run_id = $1
		RETURNING seq, sent_at`), s.RunID, s.Name, s.Key, payload).Scan(&s.Seq, &s.SentAt)
	if err != nil {
		return driver.Signal{}, d.wrap("send signal", err)
	}
	s.SentAt, s.Step = s.SentAt.UTC(), 0
	if driver.RunStatus(status) == driver.RunSleeping {
		var notified bool
		err = tx.QueryRow(ctx, d.sql(`WITH u AS (
				UPDATE {s}.oke_runs SET wake_at = now() WHERE id = $1 AND status = 2 RETURNING id
			)
			SELECT `+notifySQL("$2")+` FROM u`), s.RunID, d.channel).Scan(&notified)
		if err != nil {
			return driver.Signal{}, d.wrap("send signal: wake the run", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return driver.Signal{}, d.wrap("send signal", err)
	}
	return s, nil
}

// TakeSignal implements driver.Signaler in one transaction: it locks the
// run's row if owner holds it, takes the oldest undelivered signal of the
// name (FOR UPDATE), saves the step with it (SaveStep's statement) and marks
// the signal taken by that step.
func (d *Driver) TakeSignal(ctx context.Context, id, owner, name string, step driver.Step) (driver.Signal, bool, error) {
	if err := d.check(); err != nil {
		return driver.Signal{}, false, err
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return driver.Signal{}, false, d.wrap("take signal", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var one int
	err = tx.QueryRow(ctx, d.sql(`SELECT 1 FROM {s}.oke_runs r WHERE `+heldSQL+` FOR UPDATE`), id, owner).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Signal{}, false, fmt.Errorf("postgres: take signal %q: %w", id, driver.ErrNotOwner)
	}
	if err != nil {
		return driver.Signal{}, false, d.wrap("take signal", err)
	}
	sig := driver.Signal{RunID: id, Name: name}
	err = tx.QueryRow(ctx, d.sql(`SELECT seq, key, payload, sent_at FROM {s}.oke_signals
		WHERE run_id = $1 AND name = $2 AND step = 0 ORDER BY seq LIMIT 1 FOR UPDATE`), id, name).
		Scan(&sig.Seq, &sig.Key, &sig.Payload, &sig.SentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Signal{}, false, nil
	}
	if err != nil {
		return driver.Signal{}, false, d.wrap("take signal", err)
	}
	sig.SentAt = sig.SentAt.UTC()
	step.Result, step.Failure = driver.SignalStepResult(sig), nil
	var saved, held bool
	err = tx.QueryRow(ctx, d.sql(saveStepSQL), saveStepArgs(id, owner, step)...).Scan(&saved, &held)
	if err := d.savedStep(id, step.Seq, saved, held, err); err != nil {
		return driver.Signal{}, false, err
	}
	if _, err := tx.Exec(ctx, d.sql(`UPDATE {s}.oke_signals SET step = $3 WHERE run_id = $1 AND seq = $2`),
		id, sig.Seq, step.Seq); err != nil {
		return driver.Signal{}, false, d.wrap("take signal", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return driver.Signal{}, false, d.wrap("take signal", err)
	}
	sig.Step = step.Seq
	return sig, true, nil
}

// WakeForSignal implements driver.Signaler in one statement, which notifies
// the schema's channel when it woke the run.
func (d *Driver) WakeForSignal(ctx context.Context, id, name string) (bool, error) {
	if err := d.check(); err != nil {
		return false, err
	}
	var woke bool
	err := d.pool.QueryRow(ctx, d.sql(`WITH u AS (
			UPDATE {s}.oke_runs r SET wake_at = now()
			WHERE r.id = $1 AND r.status = 2 AND EXISTS (
				SELECT 1 FROM {s}.oke_signals WHERE run_id = $1 AND name = $2 AND step = 0)
			RETURNING r.id
		)
		SELECT count(*) > 0 AND `+notifySQL("$3")+` FROM u`), id, name, d.channel).Scan(&woke)
	return woke, d.wrap("wake run for signal", err)
}

// Signals implements driver.Signaler.
func (d *Driver) Signals(ctx context.Context, id string) ([]driver.Signal, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	rows, err := d.pool.Query(ctx, d.sql(`SELECT seq, name, key, payload, sent_at, step FROM {s}.oke_signals
		WHERE run_id = $1 ORDER BY seq`), id)
	if err != nil {
		return nil, d.wrap("list signals", err)
	}
	out := []driver.Signal{}
	for rows.Next() {
		s := driver.Signal{RunID: id}
		if err := rows.Scan(&s.Seq, &s.Name, &s.Key, &s.Payload, &s.SentAt, &s.Step); err != nil {
			rows.Close()
			return nil, d.wrap("list signals", err)
		}
		s.SentAt = s.SentAt.UTC()
		out = append(out, s)
	}
	return out, d.wrap("list signals", rows.Err())
}
