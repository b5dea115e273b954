package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/okengine/oke/driver"
)

// rowCols are the columns of oke_idempotency in the order scanRow reads them.
const rowCols = `tenant, principal, flow, idem_key, ` + rowValueCols

// rowValueCols are rowCols after the key's four columns, in order: what
// Get reads (appendValueDest), the key being its argument. Thirteen
// columns: a result of at most sixteen fits pgconn's field descriptions
// without an allocation, and the key's text is not read (nor allocated)
// again.
const rowValueCols = `fingerprint, state, owner, lease_until,
	expires_at, created_at, completed_at, resp_status, resp_content_type, resp_location, resp_body, run_id,
	resp_trace`

// rowValueDests is how many columns rowValueCols are.
const rowValueDests = rowDests - 4

// prefixedValues returns rowValueCols with each column qualified by alias.
func prefixedValues(alias string) string {
	cols := strings.Split(rowValueCols, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}

// prefixed returns rowCols with each column qualified by alias.
func prefixed(alias string) string {
	return alias + `.tenant, ` + alias + `.principal, ` + alias + `.flow, ` + alias + `.idem_key, ` +
		alias + `.fingerprint, ` + alias + `.state, ` + alias + `.owner, ` + alias + `.lease_until, ` +
		alias + `.expires_at, ` + alias + `.created_at, ` + alias + `.completed_at, ` + alias + `.resp_status, ` +
		alias + `.resp_content_type, ` + alias + `.resp_location, ` + alias + `.resp_body, ` + alias + `.run_id, ` +
		alias + `.resp_trace`
}

// claimedCols are the columns a claim reports of the row it wrote
// (claimSQL's up): rowCols without the response's (resp_*), which a
// Running row never has. Five fewer columns for every claim to describe,
// send and scan.
var claimedCols = []string{"tenant", "principal", "flow", "idem_key", "fingerprint", "state", "owner",
	"lease_until", "expires_at", "created_at", "completed_at", "run_id"}

// claimedDests is how many columns appendClaimedDest reads: len(claimedCols).
const claimedDests = 12

// qualified returns cols, each qualified by alias, joined by commas.
func qualified(alias string, cols []string) string {
	return alias + "." + strings.Join(cols, ", "+alias+".")
}

// rowScan receives one row's columns, each nullable so that it can also read
// the empty side of an outer join. Value types (pgtype's), not pointers: a
// scan allocates only the text it reads.
type rowScan struct {
	tenant, principal, flow, key, fp pgtype.Text
	state                            pgtype.Int2
	owner                            pgtype.Text
	leaseUntil, expiresAt, createdAt pgtype.Timestamptz
	completedAt                      pgtype.Timestamptz
	status                           pgtype.Int4
	contentType, location            pgtype.Text
	body                             []byte
	runID                            pgtype.Text
	trace                            pgtype.Text // resp_trace: NULL when untraced
}

// rowDests is how many columns a rowScan reads.
const rowDests = 17

func (s *rowScan) dest() []any {
	return s.appendDest(make([]any, 0, rowDests))
}

func (s *rowScan) appendDest(d []any) []any {
	return s.appendValueDest(append(d, &s.tenant, &s.principal, &s.flow, &s.key))
}

// appendClaimedDest appends the destinations of claimedCols.
func (s *rowScan) appendClaimedDest(d []any) []any {
	return append(d, &s.tenant, &s.principal, &s.flow, &s.key, &s.fp, &s.state, &s.owner, &s.leaseUntil,
		&s.expiresAt, &s.createdAt, &s.completedAt, &s.runID)
}

// appendValueDest appends the destinations of rowValueCols: rowCols after
// the key's.
func (s *rowScan) appendValueDest(d []any) []any {
	return append(d, &s.fp, &s.state, &s.owner, &s.leaseUntil,
		&s.expiresAt, &s.createdAt, &s.completedAt, &s.status, &s.contentType, &s.location, &s.body, &s.runID, &s.trace)
}

// setKey sets the key's columns to key, for a read of rowValueCols.
func (s *rowScan) setKey(key driver.Key) {
	s.tenant = pgtype.Text{String: key.Tenant, Valid: true}
	s.principal = pgtype.Text{String: key.Principal, Valid: true}
	s.flow = pgtype.Text{String: key.Flow, Valid: true}
	s.key = pgtype.Text{String: key.Key, Valid: true}
}

// row returns the scanned row, and false when the columns were all NULL.
func (s *rowScan) row() (driver.Row, bool) {
	if !s.tenant.Valid {
		return driver.Row{}, false
	}
	r := driver.Row{
		Key:         driver.Key{Tenant: s.tenant.String, Principal: s.principal.String, Flow: s.flow.String, Key: s.key.String},
		Fingerprint: s.fp.String,
		State:       driver.State(s.state.Int16),
		Owner:       s.owner.String,
		LeaseUntil:  tsTime(s.leaseUntil),
		ExpiresAt:   tsTime(s.expiresAt),
		CreatedAt:   tsTime(s.createdAt),
		CompletedAt: tsTime(s.completedAt),
		RunID:       s.runID.String,
	}
	if s.status.Valid {
		r.Response = &driver.Response{
			Status:      int(s.status.Int32),
			ContentType: s.contentType.String,
			Location:    s.location.String,
			Body:        s.body,
			Trace:       s.trace.String,
		}
		if r.Response.Body == nil {
			r.Response.Body = []byte{}
		}
	}
	return r, true
}

// tsTime is t's time, or the zero time when t is NULL.
func tsTime(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time
}

// expiredSQL is driver.Row.Expired for the row alias t at the database's
// now(): the TTL has passed and no live lease holds the row.
func expiredSQL(t string) string {
	return `(` + t + `.expires_at <= now() AND NOT (` + t + `.state = 1 AND ` + t + `.lease_until > now()))`
}

// mayReplaceSQL is driver.MayReplace for the row alias t and a claim with
// fingerprint fp (an SQL expression: a parameter, or excluded.fingerprint),
// at the database's now(): the row has expired, or it is a lapsed Running
// row of the same request. It is the one statement of the replace rule in
// SQL: every statement that decides whether a claim may take an existing
// row uses it (claimSQL, and so oke_claim; heldGuardSQL; the fence of
// replaceCompletedSQL), and TestMayReplaceSQLIsMayReplace checks it against
// driver.MayReplace.
func mayReplaceSQL(t, fp string) string {
	return expiredSQL(t) + `
		OR (` + t + `.state = 1 AND ` + t + `.lease_until <= now() AND ` + t + `.fingerprint = ` + fp + `)`
}

// claimSQL is the whole claim, one statement:
//
//   - done reads the row without a lock when it is completed and unexpired:
//     such a row never changes until it expires (Complete is its last
//     write; Sweep and a claim replace only expired rows), so its replay
//     needs no lock. Then old and up do nothing, and the statement writes
//     nothing: no transaction id, no WAL, no flush at commit — a replay is a
//     pure read, and replays of one hot key do not queue on its row lock;
//   - old locks the existing row, if any (FOR UPDATE; under READ COMMITTED it
//     waits for a concurrent writer and then sees its committed version), so
//     the row reported as Previous is the one the decision was made on;
//   - up inserts a new Running row, or, on a conflict, replaces the existing
//     row only when it has expired or is a lapsed Running row with the same
//     fingerprint (a takeover keeps the run the row links); ON CONFLICT lets
//     the primary key decide between concurrent claims of a new key;
//   - the outer SELECT reports both rows (the one up wrote without the
//     response's columns: claimedCols) and the database clock.
//
// Every time is now(): the database's clock, the same for the whole
// statement.
var claimSQL = `
WITH done AS (
	SELECT ` + rowCols + `, false AS expired
	FROM {s}.oke_idempotency d
	WHERE tenant = $1 AND principal = $2 AND flow = $3 AND idem_key = $4
		AND d.state = 2 AND d.expires_at > now()
), old AS (
	SELECT ` + rowCols + `, ` + expiredSQL("o") + ` AS expired
	FROM {s}.oke_idempotency o
	WHERE tenant = $1 AND principal = $2 AND flow = $3 AND idem_key = $4
		AND NOT EXISTS (SELECT 1 FROM done)
	FOR UPDATE
), up AS (
	INSERT INTO {s}.oke_idempotency AS t
		(tenant, principal, flow, idem_key, fingerprint, state, owner, lease_until, expires_at, created_at, run_id)
	SELECT $1, $2, $3, $4, $5, 1, $6,
		now() + $7 * interval '1 microsecond', now() + $8 * interval '1 microsecond', now(), $9
	FROM (SELECT count(*) FROM old) AS lock_old_first
	WHERE NOT EXISTS (SELECT 1 FROM done)
	ON CONFLICT (tenant, principal, flow, idem_key) DO UPDATE SET
		fingerprint = excluded.fingerprint,
		state = 1,
		owner = excluded.owner,
		lease_until = excluded.lease_until,
		expires_at = excluded.expires_at,
		created_at = excluded.created_at,
		completed_at = NULL,
		resp_status = NULL,
		resp_content_type = NULL,
		resp_location = NULL,
		resp_body = NULL,
		resp_trace = NULL,
		run_id = CASE WHEN NOT ` + expiredSQL("t") + ` AND t.run_id <> '' THEN t.run_id ELSE excluded.run_id END
	WHERE ` + mayReplaceSQL("t", "excluded.fingerprint") + `
	RETURNING ` + prefixed("t") + `
)
SELECT ` + qualified("up", claimedCols) + `, ` + prefixed("seen") + `, seen.expired, now()
FROM (VALUES (1)) AS one
LEFT JOIN up ON true
LEFT JOIN (SELECT * FROM old UNION ALL SELECT * FROM done) AS seen ON true`

// Claim implements driver.Driver in one statement (claimCallSQL, which runs
// claimSQL's rules; see claimfunc.go). When a
// concurrent claim inserted the key after this statement's snapshot and its
// row does not yield, the statement returns neither row; a second read then
// reports the winner (the decision is already made: this call did not claim).
func (d *Driver) Claim(ctx context.Context, req driver.ClaimRequest) (driver.ClaimResult, error) {
	if err := d.check(); err != nil {
		return driver.ClaimResult{}, err
	}
	k := req.Key
	for attempt := 0; ; attempt++ {
		var c claimScan
		err := d.queryRow(ctx, d.sql(claimCallSQL), claimArgs(req), c.dest()...)
		if err != nil {
			return driver.ClaimResult{}, d.wrap("claim", err)
		}
		res, ok := c.result()
		if ok {
			return res, nil
		}
		// A concurrent claim won the key after our snapshot: read its row.
		var cur rowScan
		err = d.queryRow(ctx, d.sql(`SELECT `+rowCols+`, now() FROM {s}.oke_idempotency
			WHERE tenant = $1 AND principal = $2 AND flow = $3 AND idem_key = $4`),
			[]any{k.Tenant, k.Principal, k.Flow, k.Key}, append(cur.dest(), &res.Now)...)
		if err == nil {
			res.Row, _ = cur.row()
			return res, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) || attempt >= 3 {
			return driver.ClaimResult{}, d.wrap("claim", err)
		}
		// The winner released the row in between: claim again.
	}
}

// claimArgs are claimSQL's arguments.
func claimArgs(req driver.ClaimRequest) []any {
	k := req.Key
	return []any{k.Tenant, k.Principal, k.Flow, k.Key,
		req.Fingerprint, req.Owner, micros(req.Lease), micros(req.TTL), req.RunID}
}

// claimScan is what claimSQL returns, with the slice Scan takes, in one
// allocation.
type claimScan struct {
	up, old    rowScan
	oldExpired pgtype.Bool
	now        time.Time
	slice      [claimedDests + rowDests + 2]any
}

func (c *claimScan) dest() []any {
	return append(c.old.appendDest(c.up.appendClaimedDest(c.slice[:0])), &c.oldExpired, &c.now)
}

// result is the claim's outcome; false when the statement found no row to
// report: a concurrent claim won the key after its snapshot.
func (c *claimScan) result() (driver.ClaimResult, bool) {
	res := driver.ClaimResult{Now: c.now}
	newRow, claimed := c.up.row()
	oldRow, existed := c.old.row()
	switch {
	case claimed:
		res.Claimed = true
		res.Row = newRow
		if existed {
			prev := oldRow
			res.Previous = &prev
			res.TookOver = c.oldExpired.Valid && !c.oldExpired.Bool
		}
		return res, true
	case existed:
		res.Row = oldRow
		return res, true
	}
	return res, false
}

const keyWhere = `tenant = $1 AND principal = $2 AND flow = $3 AND idem_key = $4`

// fenced runs a statement on the Running row with key held by owner (args
// after the key and owner follow as $6...), and reports ErrNotOwner when it
// touched no row.
func (d *Driver) fenced(ctx context.Context, op, q string, key driver.Key, owner string, args ...any) error {
	if err := d.check(); err != nil {
		return err
	}
	all := append([]any{key.Tenant, key.Principal, key.Flow, key.Key, owner}, args...)
	tag, err := d.exec(ctx, d.sql(q), all...)
	if err != nil {
		return d.wrap(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: %s: %w", op, driver.ErrNotOwner)
	}
	return nil
}

// Renew implements driver.Driver.
func (d *Driver) Renew(ctx context.Context, key driver.Key, owner string, lease time.Duration) error {
	return d.fenced(ctx, "renew", `UPDATE {s}.oke_idempotency
		SET lease_until = now() + $6 * interval '1 microsecond'
		WHERE `+keyWhere+` AND owner = $5 AND state = 1`, key, owner, micros(lease))
}

// completeSQL stores a response on the Running row held by $5.
const completeSQL = `UPDATE {s}.oke_idempotency SET
		state = 2, owner = '', lease_until = NULL, completed_at = now(),
		expires_at = now() + $6 * interval '1 microsecond',
		resp_status = $7, resp_content_type = $8, resp_location = $9, resp_body = $10, resp_trace = $11
	WHERE ` + keyWhere + ` AND owner = $5 AND state = 1`

func completeArgs(key driver.Key, owner string, resp driver.Response, ttl time.Duration) []any {
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	return []any{key.Tenant, key.Principal, key.Flow, key.Key, owner,
		micros(ttl), resp.Status, resp.ContentType, resp.Location, body, nullText(resp.Trace)}
}

// Complete implements driver.Driver. The response is durable when it returns
// (the statement has committed).
func (d *Driver) Complete(ctx context.Context, key driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if err := d.check(); err != nil {
		return err
	}
	args := completeArgs(key, owner, resp, ttl)
	if notice, ok := d.completionNotice(key); ok {
		// Someone waits for the key (keywait.go): the same statement
		// notifies them.
		var n int64
		err := d.queryRow(ctx, d.sql(completeNotifySQL), append(args, d.waitChannel(), notice), &n)
		if err != nil {
			return d.wrap("complete", err)
		}
		if n == 0 {
			return fmt.Errorf("postgres: complete: %w", driver.ErrNotOwner)
		}
		return nil
	}
	tag, err := d.exec(ctx, d.sql(completeSQL), args...)
	if err != nil {
		return d.wrap("complete", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: complete: %w", driver.ErrNotOwner)
	}
	return nil
}

// completeNotifySQL is completeSQL that also sends notice $13 on channel
// $12 when it stores the response: the notification goes out when, and
// only if, the completion commits.
const completeNotifySQL = `WITH u AS (` + completeSQL + ` RETURNING 1 AS one)
	SELECT count(*) FROM u, LATERAL (SELECT pg_notify($12, $13) WHERE u.one = 1) AS n`

// Release implements driver.Driver.
func (d *Driver) Release(ctx context.Context, key driver.Key, owner string) error {
	return d.fenced(ctx, "release", `DELETE FROM {s}.oke_idempotency
		WHERE `+keyWhere+` AND owner = $5 AND state = 1`, key, owner)
}

// Get implements driver.Driver.
func (d *Driver) Get(ctx context.Context, key driver.Key) (driver.Row, error) {
	if err := d.check(); err != nil {
		return driver.Row{}, err
	}
	var s rowScan
	var dest [rowDests - 4]any
	s.setKey(key)
	err := d.queryRow(ctx, d.sql(`SELECT `+rowValueCols+` FROM {s}.oke_idempotency WHERE `+keyWhere),
		[]any{key.Tenant, key.Principal, key.Flow, key.Key}, s.appendValueDest(dest[:0])...)
	if err != nil {
		return driver.Row{}, d.wrap("get", err)
	}
	r, _ := s.row()
	return r, nil
}

// List implements driver.Driver: bytewise key order (the key columns are
// COLLATE "C"), straight off the primary key.
func (d *Driver) List(ctx context.Context, after driver.Key, limit int) ([]driver.Row, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	var rows pgx.Rows
	var err error
	if after == (driver.Key{}) {
		rows, err = d.pool.Query(ctx, d.sql(`SELECT `+rowCols+` FROM {s}.oke_idempotency
			ORDER BY tenant, principal, flow, idem_key LIMIT $1`), limitArg(limit))
	} else {
		rows, err = d.pool.Query(ctx, d.sql(`SELECT `+rowCols+` FROM {s}.oke_idempotency
			WHERE (tenant, principal, flow, idem_key) > ($1, $2, $3, $4)
			ORDER BY tenant, principal, flow, idem_key LIMIT $5`),
			after.Tenant, after.Principal, after.Flow, after.Key, limitArg(limit))
	}
	if err != nil {
		return nil, d.wrap("list", err)
	}
	defer rows.Close()
	var out []driver.Row
	for rows.Next() {
		var s rowScan
		if err := rows.Scan(s.dest()...); err != nil {
			return nil, d.wrap("list", err)
		}
		r, _ := s.row()
		out = append(out, r)
	}
	return out, d.wrap("list", rows.Err())
}

// sweepBatch is how many rows one Sweep statement deletes at most.
const sweepBatch = 1000

// Sweep implements driver.Driver in batches of at most sweepBatch rows, each
// its own statement: DELETE … WHERE ctid IN (SELECT … LIMIT n FOR UPDATE SKIP
// LOCKED). Rows another transaction is touching are skipped (the next sweep
// gets them), so concurrent sweeps split the work instead of waiting. With
// WithRetention it then deletes up to limit finished runs past it, the same
// way (they are not counted in the result).
func (d *Driver) Sweep(ctx context.Context, limit int) (int, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	total, err := inBatches(limit, func(n int) (int, error) {
		tag, err := d.pool.Exec(ctx, d.sql(`DELETE FROM {s}.oke_idempotency t
			WHERE ctid IN (
				SELECT ctid FROM {s}.oke_idempotency o WHERE `+expiredSQL("o")+`
				LIMIT $1 FOR UPDATE SKIP LOCKED
			) AND `+expiredSQL("t")), n)
		return int(tag.RowsAffected()), d.wrap("sweep", err)
	})
	if err != nil {
		return total, err
	}
	if _, err := d.sweepRuns(ctx, limit); err != nil {
		return total, err
	}
	return total, nil
}
