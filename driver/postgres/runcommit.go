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

// insertRunSQL inserts a whole run, unowned, and its steps (from arrays, in
// one statement), and wakes the schedulers when the run is parked.
var insertRunSQL = `WITH r AS (
		INSERT INTO {s}.oke_runs (id, flow, input, tenant, principal, status, owner, lease_until, wake_at,
			attempts, next_attempts, idem_tenant, idem_principal, idem_flow, idem_key,
			result_status, result_content_type, result_location, result_body, error, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, '', NULL, $7, 1, 1, $8, $9, $10, $11, $12, $13, $14, $15, $16,
			coalesce($17, now()), now())
		RETURNING id, status
	), s AS (
		INSERT INTO {s}.oke_steps (run_id, seq, name, result, failure, attempts, started_at, finished_at)
		SELECT r.id, st.seq, st.name, st.result, st.failure, st.attempts, st.started_at, st.finished_at
		FROM r, unnest($18::integer[], $19::text[], $20::bytea[], $21::bytea[], $22::integer[],
			$23::timestamptz[], $24::timestamptz[]) AS st (seq, name, result, failure, attempts, started_at, finished_at)
	)
	SELECT CASE WHEN r.status = 2 THEN ` + notifySQL("$25") + ` ELSE false END FROM r`

// CommitRun implements driver.RunCommitter: the run's insert, the key's
// completion (when there is a key) and the COMMIT go as one pipeline.
func (d *Driver) CommitRun(ctx context.Context, conn *sql.Conn, key *driver.Key, owner string, resp driver.Response, ttl time.Duration, run driver.Run, steps []driver.Step) error {
	if err := d.check(); err != nil {
		return err
	}
	if run.ID == "" {
		return errors.New("postgres: commit run: empty ID")
	}
	ins := pgpipe.Statement{SQL: d.sql(insertRunSQL), Args: insertRunArgs(run, steps, d.channel)}
	if key == nil {
		return d.commitWith(ctx, conn, "commit run in transaction", driver.ErrNotOwner, "", func(*pgpipe.Conn) (string, []any) {
			return ins.SQL, ins.Args
		})
	}
	notice, _ := d.completionNotice(*key)
	return d.commitWithAll(ctx, conn, "commit run in transaction", driver.ErrNotOwner, notice, func(pc *pgpipe.Conn) []pgpipe.Statement {
		q, args := d.sql(completeOrFailSQL), completeArgs(*key, owner, resp, ttl)
		if p, _ := pc.Prelude().(*claimPrelude); p != nil && p.held != nil && p.held.owner == owner && p.held.key == *key {
			q, args = p.held.completion(d, resp, ttl)
		}
		link := pgpipe.Statement{SQL: d.sql(linkRunSQL), Args: []any{key.Tenant, key.Principal, key.Flow, key.Key, run.ID}}
		return []pgpipe.Statement{ins, {SQL: q, Args: args}, link}
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
		seq, names, results, failures, attempts, started, finished, channel}
}
