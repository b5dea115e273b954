package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/driver"
)

// runCols are the columns of oke_runs in the order runScan reads them.
var runCols = []string{"id", "flow", "input", "tenant", "principal", "status", "owner", "lease_until",
	"wake_at", "attempts", "replay_of", "parent", "event", "dedupe_key", "idem_tenant", "idem_principal",
	"idem_flow", "idem_key", "result_status", "result_content_type", "result_location", "result_body",
	"error", "created_at", "updated_at", "next_attempts", "strikes", "trace"}

// runColumns returns runCols, each qualified by alias when it is not empty.
func runColumns(alias string) string {
	s := ""
	for i, c := range runCols {
		if i > 0 {
			s += ", "
		}
		if alias != "" {
			s += alias + "."
		}
		s += c
	}
	return s
}

// runScan receives one run's columns, each nullable so that it can also read
// the empty side of an outer join.
type runScan struct {
	id, flow                            *string
	input                               []byte
	tenant, principal                   *string
	status                              *int16
	owner                               *string
	leaseUntil, wakeAt                  *time.Time
	attempts                            *int32
	replayOf, parent, event, dedupe     *string
	idemTenant, idemPrincipal, idemFlow *string
	idemKey                             *string
	resultStatus                        *int32
	resultContentType, resultLocation   *string
	resultBody                          []byte
	errText                             *string
	createdAt, updatedAt                *time.Time
	nextAttempts                        *int32
	strikes                             *int32
	trace                               *string // NULL when untraced
}

func (s *runScan) dest() []any {
	return []any{&s.id, &s.flow, &s.input, &s.tenant, &s.principal, &s.status, &s.owner, &s.leaseUntil,
		&s.wakeAt, &s.attempts, &s.replayOf, &s.parent, &s.event, &s.dedupe, &s.idemTenant, &s.idemPrincipal,
		&s.idemFlow, &s.idemKey, &s.resultStatus, &s.resultContentType, &s.resultLocation, &s.resultBody,
		&s.errText, &s.createdAt, &s.updatedAt, &s.nextAttempts, &s.strikes, &s.trace}
}

// run returns the scanned run, and false when the columns were all NULL.
func (s *runScan) run() (driver.Run, bool) {
	if s.id == nil {
		return driver.Run{}, false
	}
	r := driver.Run{
		ID:         *s.id,
		Flow:       derefText(s.flow),
		Input:      s.input,
		Tenant:     derefText(s.tenant),
		Principal:  derefText(s.principal),
		Status:     driver.RunStatus(*s.status),
		Owner:      derefText(s.owner),
		LeaseUntil: derefTime(s.leaseUntil),
		WakeAt:     derefTime(s.wakeAt),
		ReplayOf:   derefText(s.replayOf),
		Parent:     derefText(s.parent),
		Event:      derefText(s.event),
		DedupeKey:  derefText(s.dedupe),
		Error:      derefText(s.errText),
		CreatedAt:  derefTime(s.createdAt),
		UpdatedAt:  derefTime(s.updatedAt),
		Trace:      derefText(s.trace),
	}
	if s.attempts != nil {
		r.Attempts = int(*s.attempts)
	}
	if s.nextAttempts != nil {
		r.NextAttempts = int(*s.nextAttempts)
	}
	if s.strikes != nil {
		r.Strikes = int(*s.strikes)
	}
	if s.idemTenant != nil {
		r.IdemKey = &driver.Key{Tenant: *s.idemTenant, Principal: derefText(s.idemPrincipal),
			Flow: derefText(s.idemFlow), Key: derefText(s.idemKey)}
	}
	if s.resultStatus != nil {
		r.Result = &driver.Response{Status: int(*s.resultStatus), ContentType: derefText(s.resultContentType),
			Location: derefText(s.resultLocation), Body: s.resultBody}
	}
	return r, true
}

// heldSQL is the fence of the journal's fenced calls for run alias r: $1 is
// the run's ID, $2 the owner.
const heldSQL = `r.id = $1 AND r.owner = $2 AND r.owner <> '' AND r.status IN (1, 2)`

// dueSQL is driver.Journal's "due" for run alias r at the database's now():
// not finished, not held by a live lease, and WakeAt reached.
const dueSQL = `(r.status IN (1, 2) AND (r.owner = '' OR r.lease_until <= now())
	AND (r.wake_at IS NULL OR r.wake_at <= now()))`

// dueSinceSQL is when run r became due, for "longest due first".
const dueSinceSQL = `coalesce(greatest(r.wake_at, CASE WHEN r.owner <> '' THEN r.lease_until END), r.created_at)`

// CreateRun implements driver.Journal: one INSERT … ON CONFLICT (dedupe_key)
// DO NOTHING; when it inserted nothing, a read returns the run that holds the
// dedupe key (dedupe keys are never released, so it is there). A taken ID is
// a unique violation: an error, not ErrDuplicate. The same statement sends
// the wake-up notification when the new run is unowned and due now.
func (d *Driver) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	if err := d.check(); err != nil {
		return driver.Run{}, err
	}
	if run.ID == "" {
		return driver.Run{}, errors.New("postgres: create run: empty ID")
	}
	if run.Status == 0 {
		run.Status = driver.RunRunning
	}
	var it, ip, ifl, ik any
	if k := run.IdemKey; k != nil {
		it, ip, ifl, ik = k.Tenant, k.Principal, k.Flow, k.Key
	}
	var rs, rct, rloc any
	var rbody []byte
	if res := run.Result; res != nil {
		rs, rct, rloc, rbody = res.Status, res.ContentType, res.Location, res.Body
	}
	input := run.Input
	if input == nil {
		input = []byte{}
	}
	var s runScan
	var notified bool
	err := d.pool.QueryRow(ctx, d.sql(`WITH ins AS (
			INSERT INTO {s}.oke_runs AS r (`+runColumns("")+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7,
				CASE WHEN $7 <> '' THEN now() + $8 * interval '1 microsecond' END,
				$9, CASE WHEN $7 <> '' THEN 1 ELSE 0 END, $10, $11, $12, $13, $14, $15, $16, $17,
				$18, $19, $20, $21, $22, now(), now(), CASE WHEN $7 <> '' THEN 1 ELSE 0 END, 0, $24)
			ON CONFLICT (dedupe_key) DO NOTHING
			RETURNING `+runColumns("r")+`
		)
		SELECT `+runColumns("ins")+`,
			CASE WHEN ins.status IN (1, 2) AND ins.owner = '' AND (ins.wake_at IS NULL OR ins.wake_at <= now())
			THEN `+notifySQL("$23")+` ELSE false END
		FROM ins`),
		run.ID, run.Flow, input, run.Tenant, run.Principal, int16(run.Status), run.Owner, micros(lease),
		nullTime(run.WakeAt), run.ReplayOf, run.Parent, run.Event, nullText(run.DedupeKey),
		it, ip, ifl, ik, rs, rct, rloc, rbody, run.Error, d.channel, nullText(run.Trace)).Scan(append(s.dest(), &notified)...)
	if err == nil {
		r, _ := s.run()
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return driver.Run{}, d.wrap("create run", err)
	}
	err = d.pool.QueryRow(ctx, d.sql(`SELECT `+runColumns("r")+` FROM {s}.oke_runs r WHERE r.dedupe_key = $1`),
		run.DedupeKey).Scan(s.dest()...)
	if err != nil {
		return driver.Run{}, d.wrap("create run", err)
	}
	r, _ := s.run()
	return r, fmt.Errorf("postgres: create run %q: %w", run.ID, driver.ErrDuplicate)
}

// stepsSQL reads the saved steps of run $1 in order.
const stepsSQL = `SELECT seq, name, result, failure, attempts, started_at, finished_at
	FROM {s}.oke_steps WHERE run_id = $1 ORDER BY seq`

// runAndSteps sends q (a statement returning one row: runCols, then the
// columns extra receives) and stepsSQL for run id as one batch: one round
// trip, one implicit transaction, the steps read after q took effect.
func (d *Driver) runAndSteps(ctx context.Context, op, q string, args []any, id string, extra ...any) (runScan, []driver.Step, error) {
	b := &pgx.Batch{}
	b.Queue(d.sql(q), args...)
	b.Queue(d.sql(stepsSQL), id)
	br := d.pool.SendBatch(ctx, b)
	defer br.Close()
	var s runScan
	if err := br.QueryRow().Scan(append(s.dest(), extra...)...); err != nil {
		return s, nil, d.wrap(op, err)
	}
	rows, err := br.Query()
	if err != nil {
		return s, nil, d.wrap(op, err)
	}
	steps := make([]driver.Step, 0, 8)
	for rows.Next() {
		var st driver.Step
		var started, finished *time.Time
		if err := rows.Scan(&st.Seq, &st.Name, &st.Result, &st.Failure, &st.Attempts, &started, &finished); err != nil {
			rows.Close()
			return s, nil, d.wrap(op, err)
		}
		st.StartedAt, st.FinishedAt = derefTime(started), derefTime(finished)
		steps = append(steps, st)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, nil, d.wrap(op, err)
	}
	return s, steps, d.wrap(op, br.Close())
}

// GetRun implements driver.Journal: the run and its steps in one round trip.
func (d *Driver) GetRun(ctx context.Context, id string) (driver.Run, []driver.Step, error) {
	if err := d.check(); err != nil {
		return driver.Run{}, nil, err
	}
	s, steps, err := d.runAndSteps(ctx, "get run",
		`SELECT `+runColumns("r")+` FROM {s}.oke_runs r WHERE r.id = $1`, []any{id}, id)
	if err != nil {
		return driver.Run{}, nil, err
	}
	r, _ := s.run()
	return r, steps, nil
}

// ListRuns implements driver.Journal, in bytewise ID order (ascending, or
// descending with f.Desc). The statement holds only the predicates f sets,
// so each filter's plan is its own (a generic plan of "$n is empty OR …" would
// hide the indexes): pages walk the primary key from the cursor (keyset,
// never OFFSET), or oke_runs_flow, oke_runs_tenant or oke_runs_replay_of
// when that filter is set (migrations 001 and 010).
func (d *Driver) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	q, args := listRunsSQL(f, limit)
	rows, err := d.pool.Query(ctx, d.sql(q), args...)
	if err != nil {
		return nil, d.wrap("list runs", err)
	}
	defer rows.Close()
	var out []driver.Run
	for rows.Next() {
		var s runScan
		var steps int
		if err := rows.Scan(append(s.dest(), &steps)...); err != nil {
			return nil, d.wrap("list runs", err)
		}
		r, _ := s.run()
		r.Steps = steps
		out = append(out, r)
	}
	return out, d.wrap("list runs", rows.Err())
}

// listRunsSQL is ListRuns' statement (its schema {s}) and arguments: a
// keyset page in ID order holding only the predicates f sets.
func listRunsSQL(f driver.RunFilter, limit int) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.After != "" {
		where = append(where, "r.id > "+arg(f.After))
	}
	if f.Before != "" {
		where = append(where, "r.id < "+arg(f.Before))
	}
	if f.Flow != "" {
		where = append(where, "r.flow = "+arg(f.Flow))
	}
	if f.Tenant != "" {
		where = append(where, "r.tenant = "+arg(f.Tenant))
	}
	if f.ReplayOf != "" {
		where = append(where, "r.replay_of = "+arg(f.ReplayOf))
	}
	if len(f.Status) > 0 {
		// Literals, not a parameter: a partial index of one status
		// (oke_runs_failed, oke_runs_dead) serves a page of that status
		// only where the plan can prove the index's predicate, and a
		// generic plan of the prepared statement cannot from a parameter
		// (it would walk the primary key past every other run instead).
		lits := make([]string, len(f.Status))
		for i, s := range f.Status {
			lits[i] = strconv.Itoa(int(int16(s)))
		}
		where = append(where, "r.status IN ("+strings.Join(lits, ", ")+")")
	}
	if !f.CreatedAfter.IsZero() {
		where = append(where, "r.created_at >= "+arg(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "r.created_at < "+arg(f.CreatedBefore))
	}
	q := `SELECT ` + runColumns("r") + `,
			(SELECT count(*) FROM {s}.oke_steps s WHERE s.run_id = r.id)
		FROM {s}.oke_runs r`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY r.id"
	if f.Desc {
		q += " DESC"
	}
	q += " LIMIT " + arg(limitArg(limit))
	return q, args
}

// AcquireRun implements driver.Journal: one UPDATE that takes the run only
// if it is due at now(), counting the pick-up in attempts and (unless the
// run was sleeping) in next_attempts. A concurrent writer of the same run (another
// AcquireRun, the owner's SaveStep) is waited for, and the run is then
// re-checked against its new version, so of many acquirers exactly one wins
// and the others see ErrNotDue — never a false ErrNotDue because a row was
// momentarily locked. The saved steps are read in the same batch (one round
// trip, one implicit transaction).
func (d *Driver) AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (driver.Run, []driver.Step, error) {
	if err := d.check(); err != nil {
		return driver.Run{}, nil, err
	}
	if owner == "" {
		return driver.Run{}, nil, errors.New("postgres: acquire run: empty owner")
	}
	var exists bool
	s, steps, err := d.runAndSteps(ctx, "acquire run", `WITH u AS (
			UPDATE {s}.oke_runs r SET status = 1, owner = $2,
				lease_until = now() + $3 * interval '1 microsecond',
				attempts = r.attempts + 1,
				next_attempts = CASE WHEN r.status = 2 THEN greatest(r.next_attempts, 1) ELSE r.next_attempts + 1 END,
				strikes = r.strikes + CASE WHEN r.owner <> '' THEN 1 ELSE 0 END,
				updated_at = now()
			WHERE r.id = $1 AND `+dueSQL+`
			RETURNING `+runColumns("r")+`
		)
		SELECT `+runColumns("u")+`, EXISTS (SELECT 1 FROM {s}.oke_runs WHERE id = $1)
		FROM (VALUES (1)) AS one LEFT JOIN u ON true`,
		[]any{id, owner, micros(lease)}, id, &exists)
	if err != nil {
		return driver.Run{}, nil, err
	}
	r, ok := s.run()
	switch {
	case ok:
		return r, steps, nil
	case exists:
		return driver.Run{}, nil, fmt.Errorf("postgres: acquire run %q: %w", id, driver.ErrNotDue)
	default:
		return driver.Run{}, nil, fmt.Errorf("postgres: acquire run %q: %w", id, driver.ErrNotFound)
	}
}

// RenewRun implements driver.Journal.
func (d *Driver) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	if err := d.check(); err != nil {
		return err
	}
	tag, err := d.pool.Exec(ctx, d.sql(`UPDATE {s}.oke_runs r
		SET lease_until = now() + $3 * interval '1 microsecond'
		WHERE `+heldSQL), id, owner, micros(lease))
	if err != nil {
		return d.wrap("renew run", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: renew run %q: %w", id, driver.ErrNotOwner)
	}
	return nil
}

// saveStepSQL saves step $3 of run $1 held by $2 if it is the next one, and
// reports whether it did and whether $2 holds the run. The run's
// next_attempts becomes 1: the saving execution goes on to the step after.
// SaveStep runs it; CommitStep (a step saved in a flow's transaction) runs
// saveStepOrFailSQL, its twin that fails instead of reporting.
const saveStepSQL = saveStepWith + `
		SELECT EXISTS (SELECT 1 FROM ins),
			EXISTS (SELECT 1 FROM {s}.oke_runs r WHERE ` + heldSQL + `)`

// saveStepWith saves step $3 of run $1 held by $2 if it is the next one:
// the run row is updated (and so locked) only then, and the step inserted
// only if that update happened (ins holds its seq).
const saveStepWith = `WITH r AS (
			UPDATE {s}.oke_runs r SET updated_at = coalesce($9, now()), next_attempts = 1
			WHERE ` + heldSQL + `
				AND (SELECT coalesce(max(seq), 0) FROM {s}.oke_steps WHERE run_id = $1) = $3 - 1
			RETURNING r.id
		), ins AS (
			INSERT INTO {s}.oke_steps (run_id, seq, name, result, failure, attempts, started_at, finished_at)
			SELECT r.id, $3, $4, $5, $6, $7, $8, $9 FROM r
			RETURNING seq
		)`

func saveStepArgs(id, owner string, step driver.Step) []any {
	return []any{id, owner, step.Seq, step.Name, step.Result, step.Failure, step.Attempts,
		nullTime(step.StartedAt), nullTime(step.FinishedAt)}
}

// SaveStep implements driver.Journal in one statement: the run row is
// updated (and so locked) only if owner holds it and the step is the next
// one, and the step is inserted only if that update happened. Durable when
// it returns.
func (d *Driver) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	if err := d.check(); err != nil {
		return err
	}
	var saved, held bool
	err := d.pool.QueryRow(ctx, d.sql(saveStepSQL), saveStepArgs(id, owner, step)...).Scan(&saved, &held)
	return d.savedStep(id, step.Seq, saved, held, err)
}

// savedStep turns what saveStepSQL reported into SaveStep's error.
func (d *Driver) savedStep(id string, seq int, saved, held bool, err error) error {
	if err = d.wrap("save step", err); errors.Is(err, errUnique) {
		// A concurrent SaveStep of the same seq won.
		return fmt.Errorf("postgres: save step %q seq %d: %w", id, seq, driver.ErrStepOrder)
	}
	switch {
	case err != nil:
		return err
	case saved:
		return nil
	case !held:
		return fmt.Errorf("postgres: save step %q: %w", id, driver.ErrNotOwner)
	default:
		return fmt.Errorf("postgres: save step %q seq %d: %w", id, seq, driver.ErrStepOrder)
	}
}

// FinishRun implements driver.Journal. A park — a release (RunRunning) or
// a sleep — sends the wake-up notification in the same statement, whatever
// its wake time: the listeners pick the run up now if it is due, and re-arm
// their NextDue timers for it if it is not, so any instance can wake it, not
// only the one that parked it.
func (d *Driver) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	if err := d.check(); err != nil {
		return err
	}
	switch f.Status {
	case driver.RunRunning, driver.RunSleeping, driver.RunCompleted, driver.RunFailed, driver.RunDead:
	default:
		return fmt.Errorf("postgres: finish run: unknown status %d", f.Status)
	}
	var rs, rct, rloc any
	var rbody []byte
	if res := f.Result; res != nil {
		rs, rct, rloc, rbody = res.Status, res.ContentType, res.Location, res.Body
		if rbody == nil {
			rbody = []byte{}
		}
	}
	var notified bool
	err := d.pool.QueryRow(ctx, d.sql(`WITH u AS (
			UPDATE {s}.oke_runs r SET
				status = $3, owner = '', lease_until = NULL, wake_at = $4, error = $5,
				result_status = CASE WHEN $6::integer IS NULL THEN r.result_status ELSE $6 END,
				result_content_type = CASE WHEN $6::integer IS NULL THEN r.result_content_type ELSE $7 END,
				result_location = CASE WHEN $6::integer IS NULL THEN r.result_location ELSE $8 END,
				result_body = CASE WHEN $6::integer IS NULL THEN r.result_body ELSE $9 END,
				strikes = $11,
				next_attempts = CASE WHEN $12::integer > 0 THEN $12 ELSE r.next_attempts END,
				updated_at = now()
			WHERE `+heldSQL+`
			RETURNING r.status, r.wake_at
		)
		SELECT CASE WHEN u.status IN (1, 2) THEN `+notifySQL("$10")+` ELSE false END
		FROM u`),
		id, owner, int16(f.Status), nullTime(f.WakeAt), f.Error, rs, rct, rloc, rbody, d.channel,
		int32(f.Strikes), int32(f.NextAttempts)).Scan(&notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: finish run %q: %w", id, driver.ErrNotOwner)
	}
	return d.wrap("finish run", err)
}

// DueRuns implements driver.Journal: the due runs, longest due first, read
// with FOR UPDATE SKIP LOCKED so that a run another instance is acquiring
// or working on right now is left out rather than waited for.
func (d *Driver) DueRuns(ctx context.Context, flows []string, limit int) ([]string, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	// $2 is NULL for every flow (a nil slice encodes as NULL).
	rows, err := d.pool.Query(ctx, d.sql(`SELECT r.id FROM {s}.oke_runs r WHERE `+dueSQL+`
		AND ($2::text[] IS NULL OR r.flow = ANY($2))
		ORDER BY `+dueSinceSQL+`, r.id LIMIT $1 FOR UPDATE SKIP LOCKED`), limitArg(limit), flowsArg(flows))
	if err != nil {
		return nil, d.wrap("due runs", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, d.wrap("due runs", err)
	}
	return ids, nil
}

// flowsArg is a DueRuns/NextDue flows filter as a query argument: NULL for
// every flow.
func flowsArg(flows []string) any {
	if len(flows) == 0 {
		return nil
	}
	return flows
}

// ClaimKey implements driver.Journal: INSERT … ON CONFLICT DO NOTHING, then,
// when another run holds the key, a read of the winner (claims are never
// deleted, so the winner is there).
func (d *Driver) ClaimKey(ctx context.Context, key, runID string) (string, error) {
	if err := d.check(); err != nil {
		return "", err
	}
	var winner string
	err := d.pool.QueryRow(ctx, d.sql(`INSERT INTO {s}.oke_claims (claim_key, run_id) VALUES ($1, $2)
		ON CONFLICT (claim_key) DO NOTHING RETURNING run_id`), key, runID).Scan(&winner)
	if errors.Is(err, pgx.ErrNoRows) {
		err = d.pool.QueryRow(ctx, d.sql(`SELECT run_id FROM {s}.oke_claims WHERE claim_key = $1`), key).Scan(&winner)
	}
	if err != nil {
		return "", d.wrap("claim key", err)
	}
	return winner, nil
}
