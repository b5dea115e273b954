package postgres

import (
	"context"
	"time"
)

// WithRetention makes Sweep delete finished runs (completed or failed) once
// d has passed since they finished, in batches, with their steps, their
// step attempts and the business keys they claimed. A run's DedupeKey and
// claims go with it, so a duplicate event or a second claim that arrives
// after the retention starts over: pick a retention longer than duplicates
// can arrive late. Running and sleeping runs are never deleted. Zero (the
// default) keeps every run.
func WithRetention(d time.Duration) Option {
	return func(c *config) { c.retention = d }
}

// sweepRuns deletes up to limit finished runs older than the retention, in
// one statement per batch: SKIP LOCKED leaves runs another transaction
// touches for the next sweep, so sweeps never wait for (or block) a run.
func (d *Driver) sweepRuns(ctx context.Context, limit int) (int, error) {
	if d.retention <= 0 {
		return 0, nil
	}
	return inBatches(limit, func(n int) (int, error) {
		var got int
		err := d.pool.QueryRow(ctx, d.sql(`WITH gone AS (
				DELETE FROM {s}.oke_runs WHERE id IN (
					SELECT id FROM {s}.oke_runs
					WHERE status IN (3, 4) AND updated_at < now() - $1 * interval '1 microsecond'
					ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED
				) AND status IN (3, 4)
				RETURNING id
			), steps AS (
				DELETE FROM {s}.oke_steps WHERE run_id IN (SELECT id FROM gone)
			), starts AS (
				DELETE FROM {s}.oke_step_starts WHERE run_id IN (SELECT id FROM gone)
			), claims AS (
				DELETE FROM {s}.oke_claims WHERE run_id IN (SELECT id FROM gone)
			), signals AS (
				DELETE FROM {s}.oke_signals WHERE run_id IN (SELECT id FROM gone)
			)
			SELECT count(*) FROM gone`), micros(d.retention), n).Scan(&got)
		return got, d.wrap("sweep runs", err)
	})
}

// inBatches calls batch with sizes of at most sweepBatch until it deletes
// fewer than it was asked to, or limit (when positive) is reached, and
// returns how many it deleted in all.
func inBatches(limit int, batch func(n int) (int, error)) (int, error) {
	total := 0
	for limit <= 0 || total < limit {
		n := sweepBatch
		if limit > 0 {
			n = min(n, limit-total)
		}
		got, err := batch(n)
		if err != nil {
			return total, err
		}
		total += got
		if got < n {
			break
		}
	}
	return total, nil
}
