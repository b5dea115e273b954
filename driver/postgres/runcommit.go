package postgres

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

var _ driver.RunCommitter = (*Driver)(nil)

// insertRunCTE inserts a whole run, unowned, and its steps (from arrays),
// as the CTEs r and s of one statement; $26 is the run's trace.
const insertRunCTE = `WITH r AS (
		INSERT INTO {s}.oke_runs (id, flow, input, tenant, principal, status, owner, lease_until, wake_at,
			attempts, next_attempts, idem_tenant, idem_principal, idem_flow, idem_key,
			result_status, result_content_type, result_location, result_body, error, created_at, updated_at, trace)
		VALUES ($1, $2, $3, $4, $5, $6, '', NULL, $7, 1, 1, $8, $9, $10, $11, $12, $13, $14, $15, $16,
			coalesce($17, now()), now(), $26)
		RETURNING id, status
	), s AS (
		INSERT INTO {s}.oke_steps (run_id, seq, name, result, failure, attempts, started_at, finished_at)
		SELECT r.id, st.seq, st.name, st.result, st.failure, st.attempts, st.started_at, st.finished_at
		FROM r, unnest($18::integer[], $19::text[], $20::bytea[], $21::bytea[], $22::integer[],
			$23::timestamptz[], $24::timestamptz[]) AS st (seq, name, result, failure, attempts, started_at, finished_at)
	)`

// runNotifySQL wakes the schedulers when the run is parked ($25: the
// channel).
var runNotifySQL = `CASE WHEN r.status = 2 THEN ` + notifySQL("$25") + ` ELSE false END`

// insertRunSQL is the run and its steps alone (a request without a key).
var insertRunSQL = insertRunCTE + `
	SELECT ` + runNotifySQL + ` FROM r`

// The run, its steps and the key's completed row, linked to the run, in one
// statement, for a claim the transaction holds (heldclaim.go): the row is
// new (insertCompleted), or replaces the one the lookup found, failing with
// a division by zero when that may no longer be replaced (as
// replaceCompletedSQL does). $27–$37 are the completion's arguments
// (heldClaim.completion's, in its order).
const completedRowValues = `INSERT INTO {s}.oke_idempotency AS t
		(tenant, principal, flow, idem_key, fingerprint, state, owner, expires_at, created_at, completed_at,
		 resp_status, resp_content_type, resp_location, resp_body, resp_trace, run_id)
	VALUES ($27, $28, $29, $30, $31, 2, '', now() + $32 * interval '1 microsecond', now(), now(), $33, $34, $35, $36, $37, $1)`

var (
	insertRunCompletedSQL = insertRunCTE + `, k AS (` + completedRowValues + ` RETURNING 1)
	SELECT ` + runNotifySQL + `, (SELECT count(*) FROM k) FROM r`
	insertRunReplacedSQL = insertRunCTE + `, k AS (` + completedRowValues + `
		ON CONFLICT (tenant, principal, flow, idem_key) DO UPDATE SET
			fingerprint = excluded.fingerprint, state = 2, owner = '', lease_until = NULL,
			expires_at = excluded.expires_at, created_at = excluded.created_at, completed_at = excluded.completed_at,
			resp_status = excluded.resp_status, resp_content_type = excluded.resp_content_type,
			resp_location = excluded.resp_location, resp_body = excluded.resp_body, resp_trace = excluded.resp_trace,
			run_id = excluded.run_id
		WHERE ` + mayReplaceSQL("t", "excluded.fingerprint") + `
		RETURNING 1)
	SELECT ` + runNotifySQL + `, 1 / (SELECT count(*) FROM k) FROM r`
)

// CommitRun implements driver.RunCommitter. For a claim the transaction
// holds — a coalesced run's — the run, its steps and the key's completed
// row are one statement, sent with the COMMIT: one round trip. Otherwise
// the run's insert, the key's completion (fenced by owner) and its link to
// the run go as three statements in that pipeline.
func (d *Driver) CommitRun(ctx context.Context, conn *sql.Conn, key *driver.Key, owner string, resp driver.Response, ttl time.Duration, run driver.Run, steps []driver.Step) error {
	if err := d.check(); err != nil {
		return err
	}
	if run.ID == "" {
		return errors.New("postgres: commit run: empty ID")
	}
	args := insertRunArgs(run, steps, d.channel)
	if key == nil {
		return d.commitWith(ctx, conn, "commit run in transaction", driver.ErrNotOwner, "", func(*pgpipe.Conn) (string, []any) {
			return d.sql(insertRunSQL), args
		})
	}
	notice, _ := d.completionNotice(*key)
	return d.commitWithAll(ctx, conn, "commit run in transaction", driver.ErrNotOwner, notice, func(pc *pgpipe.Conn) []pgpipe.Statement {
		if p, _ := pc.Prelude().(*claimPrelude); p != nil && p.held != nil && p.held.owner == owner && p.held.key == *key {
			_, cargs := p.held.completion(d, resp, ttl)
			q := insertRunCompletedSQL
			if p.held.prev != nil {
				q = insertRunReplacedSQL
			}
			return []pgpipe.Statement{{SQL: d.sql(q), Args: append(args, cargs...)}}
		}
		return []pgpipe.Statement{
			{SQL: d.sql(insertRunSQL), Args: args},
			{SQL: d.sql(completeOrFailSQL), Args: completeArgs(*key, owner, resp, ttl)},
			{SQL: d.sql(linkRunSQL), Args: []any{key.Tenant, key.Principal, key.Flow, key.Key, run.ID}},
		}
	})
}

// linkRunSQL links the key's completed row to the run that answered it, so
// that a retry of a parked answer finds the run (Prefer: wait).
const linkRunSQL = `UPDATE {s}.oke_idempotency SET run_id = $5
	WHERE tenant = $1 AND principal = $2 AND flow = $3 AND idem_key = $4`

func insertRunArgs(run driver.Run, steps []driver.Step, channel string) []any {
	var it, ip, ifl, ik any
	if k := run.IdemKey; k != nil {
		it, ip, ifl, ik = k.Tenant, k.Principal, k.Flow, k.Key
	}
	var rs, rct, rloc any
	var rbody []byte
	if res := run.Result; res != nil {
		rs, rct, rloc, rbody = res.Status, res.ContentType, res.Location, res.Body
		if rbody == nil {
			rbody = []byte{}
		}
	}
	input := run.Input
	if input == nil {
		input = []byte{}
	}
	n := len(steps)
	seq, attempts := make([]int32, n), make([]int32, n)
	names := make([]string, n)
	results, failures := make([][]byte, n), make([][]byte, n)
	started, finished := make([]*time.Time, n), make([]*time.Time, n)
	for i := range steps {
		s := &steps[i]
		seq[i], attempts[i], names[i] = int32(s.Seq), int32(s.Attempts), s.Name
		results[i], failures[i] = s.Result, s.Failure
		if !s.StartedAt.IsZero() {
			started[i] = &s.StartedAt
		}
		if !s.FinishedAt.IsZero() {
			finished[i] = &s.FinishedAt
		}
	}
	return []any{run.ID, run.Flow, input, run.Tenant, run.Principal, int16(run.Status), nullTime(run.WakeAt),
		it, ip, ifl, ik, rs, rct, rloc, rbody, run.Error, nullTime(run.CreatedAt),
		seq, names, results, failures, attempts, started, finished, channel, nullText(run.Trace)}
}
