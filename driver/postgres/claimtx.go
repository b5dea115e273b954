package postgres

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/okengine/oke/driver"
)

var _ driver.TxClaimer = (*Driver)(nil)

// guardSQL fails, with a division by zero, unless owner holds the key: sent
// behind a claim, it lets the flow's transaction begin only when the claim
// went to the flow.
const guardSQL = `SELECT 1 / count(*) FROM {s}.oke_idempotency WHERE ` + keyWhere + ` AND owner = $5 AND state = 1`

// sendClaimed sends t's claim, the transaction's BEGIN and its first
// statement in one pipeline, one round trip:
//
//	claim · Sync · guard · BEGIN · query · Sync
//
// The claim commits on its own at the first Sync, as a claim made before
// the flow ran would: other requests see the key running (409) while the
// flow works. The guard fails unless the claim went to the flow's owner
// token; the server then skips the BEGIN and the query (an error skips the
// rest of a pipeline up to its next Sync), so no transaction opens and
// nothing of the flow's runs. Otherwise the BEGIN turns the guard's implicit
// transaction into the flow's, and the caller reads the query's results.
//
// sent is false when nothing was sent because the claim had been made
// already and went to the flow, or was made here in a round trip of its
// own: the caller then sends the statement with its BEGIN. The claim goes
// on its own when the connection does not use prepared statements (pgx's
// QueryExecModeCacheStatement or CacheDescribe), when query's arguments
// start with a pgx query option, and when the connection already prepared
// maxClaimPrepared statements to send behind a claim. Each statement is
// prepared the first time a connection sends it this way (a round trip, as
// pgx takes for any new statement); the ones ahead of the BEGIN only for
// the kind of claim the connection sends (prepareAround).
func (c *lazyConn) sendClaimed(ctx context.Context, t driver.ClaimTicket, query string, args []any) (br begun, err error, sent bool) {
	pc := c.Conn.Conn()
	sds, pipelined, err := c.prepareClaimed(ctx, query, args)
	if err != nil {
		c.pending = false
		return nil, err, true
	}
	if pipelined {
		// Encode the statement's arguments before the claim is taken: an
		// argument that cannot be sent fails the statement alone, and the
		// claim is made later (oke's Decide), as if it had come first.
		if err := c.stmtArgs.Build(pc.TypeMap(), sds.stmt, args); err != nil {
			c.pending = false
			return nil, err, true
		}
	}
	req, ok, err := t.Take()
	if !ok {
		if err != nil {
			c.refuse(err)
			return nil, err, true
		}
		return nil, nil, false
	}
	if !pipelined {
		return c.claimAlone(ctx, t, req)
	}
	if err := c.prepareAround(ctx, &sds, req.InTx); err != nil {
		// The connection could not prepare them: claim on the driver's
		// pool, and send the statement with its BEGIN as usual.
		return c.claimAlone(ctx, t, req)
	}
	if req.InTx {
		return c.sendHeld(ctx, t, req, sds)
	}

	m := pc.TypeMap()
	if err := c.claimArgs.Build(m, sds.claim, claimArgs(req)); err != nil {
		return c.claimFailed(t, nil, fmt.Errorf("postgres: encode claim: %w", err))
	}
	pipe := pc.PgConn().StartPipeline(ctx)
	pipe.SendQueryStatement(sds.claim, c.claimArgs.ParamValues, c.claimArgs.ParamFormats, c.claimArgs.ResultFormats)
	pipe.SendPipelineSync()
	k := req.Key
	if err := c.claimArgs.Build(m, sds.guard, []any{k.Tenant, k.Principal, k.Flow, k.Key, req.Owner}); err != nil {
		// Unsynced, the pipeline's Close closes the connection: the claim
		// is not sent.
		return c.claimFailed(t, pipe, fmt.Errorf("postgres: encode claim guard: %w", err))
	}
	pipe.SendQueryStatement(sds.guard, c.claimArgs.ParamValues, c.claimArgs.ParamFormats, c.claimArgs.ResultFormats)
	pipe.SendQueryStatement(sds.begin, nil, nil, nil)
	pipe.SendQueryStatement(sds.stmt, c.stmtArgs.ParamValues, c.stmtArgs.ParamFormats, c.stmtArgs.ResultFormats)
	if err := pipe.Sync(); err != nil {
		// The connection is closed; whether the claim reached the server
		// is unknown (a row it made lapses with its lease).
		return c.claimFailed(t, pipe, c.d.wrap("claim", err))
	}

	// The claim, then its Sync (also after the claim failed in the server:
	// its error ends the first segment, whose Sync still answers).
	res, decided, cerr := readClaim(pipe, m)
	var pgErr *pgconn.PgError
	if cerr == nil || errors.As(cerr, &pgErr) {
		if err := readSync(pipe); cerr == nil {
			cerr = err
		}
	}
	if cerr != nil {
		cerr = c.d.wrap("claim", cerr)
	}
	// The guard.
	gerr := readClosed(pipe)
	if cerr == nil && !decided {
		// A concurrent claim won the key after the claim's snapshot (the
		// guard refused): ask again, on its own.
		pipe.Close()
		return c.claimAlone(ctx, t, req)
	}
	if err := t.Done(res, cerr); err != nil {
		// The guard passes only for the claim's owner, so the transaction
		// began only if this is unreachable.
		return c.endRefused(ctx, pipe, err)
	}
	c.pending = false
	if gerr == nil {
		gerr = readClosed(pipe) // the BEGIN
	}
	if gerr != nil {
		// The flow holds the key, yet its transaction did not begin.
		pipe.Close()
		return nil, gerr, true
	}
	return c.readFirst(pipe, sds.stmt, m)
}

// claimAlone makes t's claim in a round trip of its own and reports, as
// sendClaimed does, that the statement is still to be sent with its BEGIN
// (sent false), or the refusal it gets instead.
func (c *lazyConn) claimAlone(ctx context.Context, t driver.ClaimTicket, req driver.ClaimRequest) (begun, error, bool) {
	res, err := c.d.Claim(ctx, req)
	if err := t.Done(res, err); err != nil {
		c.refuse(err)
		return nil, err, true
	}
	return nil, nil, false
}

// refuse marks the connection's transaction as refused with err: it was
// never begun, and its statements fail with err.
func (c *lazyConn) refuse(err error) {
	c.pending, c.refused = false, err
}

// claimFailed tells t that its claim could not be made or read (err), after
// closing pipe if one was started, and refuses the transaction with what t
// says.
func (c *lazyConn) claimFailed(t driver.ClaimTicket, pipe *pgconn.Pipeline, err error) (begun, error, bool) {
	if pipe != nil {
		pipe.Close()
	}
	err = t.Done(driver.ClaimResult{}, err)
	c.refuse(err)
	return nil, err, true
}

// endRefused closes pipe and refuses the transaction with err; should the
// server have begun it, it is rolled back first.
func (c *lazyConn) endRefused(ctx context.Context, pipe *pgconn.Pipeline, err error) (begun, error, bool) {
	pipe.Close()
	pc := c.Conn.Conn()
	if pc.PgConn().TxStatus() != 'I' {
		if _, rerr := pc.Exec(ctx, "ROLLBACK"); rerr != nil {
			return nil, badConn(rerr), true
		}
	}
	c.refuse(err)
	return nil, err, true
}

// claimedStatements are the statements of sendClaimed, prepared on the
// connection.
type claimedStatements struct {
	claim, guard, begin, stmt *pgconn.StatementDescription
	lock, lookup, heldGuard   *pgconn.StatementDescription // sendHeld's
}

// prepareClaimed prepares the statements of sendClaimed on the connection,
// or reports (false) that query's claim cannot go in its pipeline.
func (c *lazyConn) prepareClaimed(ctx context.Context, query string, args []any) (claimedStatements, bool, error) {
	var sds claimedStatements
	pc := c.Conn.Conn()
	switch pc.Config().DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
	default:
		return sds, false, nil
	}
	if len(args) > 0 {
		switch args[0].(type) {
		case pgx.QueryRewriter, pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
			return sds, false, nil
		}
	}
	st := claimState(pc.PgConn())
	for len(st.stale) > 0 {
		if err := pc.Deallocate(ctx, st.stale[0]); err != nil {
			return sds, false, badConn(err)
		}
		st.stale = st.stale[1:]
	}
	if _, ok := st.stmts[query]; !ok && len(st.stmts) >= maxClaimPrepared {
		return sds, false, nil
	}
	if st.begin == nil {
		var err error
		if st.begin, err = pc.Prepare(ctx, "BEGIN", "BEGIN"); err != nil {
			return sds, false, badConn(err)
		}
	}
	sd, err := pc.Prepare(ctx, query, query) // pgx keeps it: a map lookup after the first time
	if err != nil {
		return sds, false, badConn(err)
	}
	st.stmts[query] = struct{}{}
	return claimedStatements{begin: st.begin, stmt: sd}, true, nil
}

// prepareAround prepares, once per connection (and driver schema), the
// statements that go ahead of the BEGIN for a claim of the given kind —
// the claim and its guard, or a held claim's lock, lookup and guard — and
// adds them to sds.
func (c *lazyConn) prepareAround(ctx context.Context, sds *claimedStatements, inTx bool) error {
	pc := c.Conn.Conn()
	st := claimState(pc.PgConn())
	type stmt struct {
		sd  **pgconn.StatementDescription
		sql string
	}
	group := []stmt{{&st.claim, c.d.sql(claimCallSQL)}, {&st.guard, c.d.sql(guardSQL)}}
	if inTx {
		group = []stmt{{&st.lock, c.d.sql(heldLockSQL)}, {&st.lookup, c.d.sql(heldLookupSQL)}, {&st.heldGuard, c.d.sql(heldGuardSQL)}}
	}
	if last := group[len(group)-1]; *last.sd == nil || (*last.sd).SQL != last.sql {
		for _, p := range group {
			var err error
			if *p.sd, err = pc.Prepare(ctx, p.sql, p.sql); err != nil {
				*group[len(group)-1].sd = nil
				return err
			}
		}
	}
	sds.claim, sds.guard = st.claim, st.guard
	sds.lock, sds.lookup, sds.heldGuard = st.lock, st.lookup, st.heldGuard
	return nil
}

// claimConn is what a connection (it outlives its lazyConn, which
// database/sql drops when the connection goes back to the pool) keeps of
// its statements sent behind a claim. pgx keeps the prepared statements
// themselves, by their SQL (pgx.Conn.Prepare).
type claimConn struct {
	claim, guard, begin     *pgconn.StatementDescription // prepared
	lock, lookup, heldGuard *pgconn.StatementDescription // prepared, for sendHeld
	stmts                   map[string]struct{}          // first statements prepared
	stale                   []string                     // prepared statements to deallocate: see forgetIfStale
}

// claimState returns the connection's claimConn.
func claimState(pc *pgconn.PgConn) *claimConn {
	data := pc.CustomData()
	st, ok := data["oke.claim"].(*claimConn)
	if !ok {
		st = &claimConn{stmts: map[string]struct{}{}}
		data["oke.claim"] = st
	}
	return st
}

// forgetIfStale drops a prepared statement the server refused to run
// because its tables changed under it ("cached plan must not change result
// type"): it is deallocated before the next claimed statement and
// prepared again when next sent.
func (c *lazyConn) forgetIfStale(sd *pgconn.StatementDescription, err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "0A000" {
		st := claimState(c.Conn.Conn().PgConn())
		delete(st.stmts, sd.SQL)
		st.stale = append(st.stale, sd.SQL)
	}
}

// badConn is err, or database/sql's ErrBadConn when nothing was sent, as
// pgx's own adapter says.
func badConn(err error) error {
	if pgconn.SafeToRetry(err) {
		return sqldriver.ErrBadConn
	}
	return err
}

// readClaim reads the claim's row from the pipeline. decided is false when
// the claim found no row to report (claimScan.result).
func readClaim(pipe *pgconn.Pipeline, m *pgtype.Map) (driver.ClaimResult, bool, error) {
	r, err := pipe.GetResults()
	if err != nil {
		return driver.ClaimResult{}, false, err
	}
	rr, ok := r.(*pgconn.ResultReader)
	if !ok {
		return driver.ClaimResult{}, false, fmt.Errorf("pipeline: expected the claim's results, got %T", r)
	}
	rows := pgx.RowsFromResultReader(m, rr)
	var c claimScan
	if !rows.Next() {
		rows.Close()
		if err := rows.Err(); err != nil {
			return driver.ClaimResult{}, false, err
		}
		return driver.ClaimResult{}, false, pgx.ErrNoRows
	}
	err = rows.Scan(c.dest()...)
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return driver.ClaimResult{}, false, err
	}
	res, decided := c.result()
	return res, decided, nil
}

// readSync reads a Sync's result from the pipeline.
func readSync(pipe *pgconn.Pipeline) error {
	r, err := pipe.GetResults()
	if err != nil {
		return err
	}
	if _, ok := r.(*pgconn.PipelineSync); !ok {
		return fmt.Errorf("pipeline: expected a sync, got %T", r)
	}
	return nil
}

// readClosed reads a statement's results from the pipeline and discards
// them.
func readClosed(pipe *pgconn.Pipeline) error {
	r, err := pipe.GetResults()
	if err != nil {
		return err
	}
	rr, ok := r.(*pgconn.ResultReader)
	if !ok {
		return fmt.Errorf("pipeline: expected a statement's results, got %T", r)
	}
	_, err = rr.Close()
	return err
}

// claimedResults are the results of the statement sendClaimed sent: the
// statement's, then the pipeline's final Sync.
type claimedResults struct {
	c    *lazyConn
	sd   *pgconn.StatementDescription
	pipe *pgconn.Pipeline
	rr   *pgconn.ResultReader
	m    *pgtype.Map
	rows pgx.Rows
}

func (r *claimedResults) Exec() (pgconn.CommandTag, error) {
	tag, err := r.rr.Close()
	if err != nil {
		r.c.forgetIfStale(r.sd, err)
	}
	return tag, err
}

func (r *claimedResults) Query() (pgx.Rows, error) {
	r.rows = pgx.RowsFromResultReader(r.m, r.rr)
	return r.rows, nil
}

func (r *claimedResults) Close() error {
	var err error
	if r.rows != nil {
		r.rows.Close()
		err = r.rows.Err()
	} else {
		_, err = r.rr.Close()
	}
	if err != nil {
		r.c.forgetIfStale(r.sd, err)
	}
	if cerr := r.pipe.Close(); err == nil {
		err = cerr
	}
	return err
}
