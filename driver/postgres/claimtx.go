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

// sendClaimed sends t's claim, held by the flow's transaction, the
// transaction's BEGIN and its first statement in one pipeline, one round
// trip (see heldclaim.go):
//
//	lock · lookup · guard · BEGIN · query · Sync
//
// The guard fails unless the claim went to the flow; the server then skips
// the BEGIN and the query (an error skips the rest of a pipeline up to its
// next Sync), so no transaction opens and nothing of the flow's runs.
// Otherwise the BEGIN turns the implicit transaction the claim's
// statements opened into the flow's, and the caller reads the query's
// results.
//
// sent is false when nothing was sent because the claim had been made
// already and went to the flow, or was made here in a round trip of its
// own (not held: a claim as Claim makes it): the caller then sends the
// statement with its BEGIN. The claim goes on its own when the connection
// does not use prepared statements (pgx's QueryExecModeCacheStatement or
// CacheDescribe), when query's arguments start with a pgx query option,
// and when the connection already prepared maxClaimPrepared statements to
// send behind a claim. Each statement is prepared the first time a
// connection sends it this way (a round trip, as pgx takes for any new
// statement); the claim's own statements once per connection
// (prepareAround).
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
	if err := c.prepareAround(ctx, &sds); err != nil {
		// The connection could not prepare them: claim on the driver's
		// pool, and send the statement with its BEGIN as usual.
		return c.claimAlone(ctx, t, req)
	}
	return c.sendHeld(ctx, t, req, sds)
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
	begin, stmt             *pgconn.StatementDescription
	lock, lookup, heldGuard *pgconn.StatementDescription // the claim's
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
// claim's statements that go ahead of the BEGIN — its lock, lookup and
// guard — and adds them to sds.
func (c *lazyConn) prepareAround(ctx context.Context, sds *claimedStatements) error {
	pc := c.Conn.Conn()
	st := claimState(pc.PgConn())
	group := []struct {
		sd  **pgconn.StatementDescription
		sql string
	}{{&st.lock, c.d.sql(heldLockSQL)}, {&st.lookup, c.d.sql(heldLookupSQL)}, {&st.heldGuard, c.d.sql(heldGuardSQL)}}
	if last := group[len(group)-1]; *last.sd == nil || (*last.sd).SQL != last.sql {
		for _, p := range group {
			var err error
			if *p.sd, err = pc.Prepare(ctx, p.sql, p.sql); err != nil {
				*group[len(group)-1].sd = nil
				return err
			}
		}
	}
	sds.lock, sds.lookup, sds.heldGuard = st.lock, st.lookup, st.heldGuard
	return nil
}

// claimConn is what a connection (it outlives its lazyConn, which
// database/sql drops when the connection goes back to the pool) keeps of
// its statements sent behind a claim. pgx keeps the prepared statements
// themselves, by their SQL (pgx.Conn.Prepare).
type claimConn struct {
	begin                   *pgconn.StatementDescription // prepared
	lock, lookup, heldGuard *pgconn.StatementDescription // prepared: the claim's
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
