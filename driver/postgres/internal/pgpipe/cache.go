package pgpipe

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// firstStatements are the BEGIN and the first statement of a transaction
// sent behind a prelude, prepared on the connection.
type firstStatements struct {
	begin, stmt *pgconn.StatementDescription
}

// prepared is what a connection (it outlives its Conn, which database/sql
// drops when the connection goes back to the pool) keeps of the first
// statements it sent behind a prelude. pgx keeps the prepared statements
// themselves, by their SQL (pgx.Conn.Prepare).
type prepared struct {
	begin, commit *pgconn.StatementDescription // BEGIN and COMMIT, once prepared (prepareOwn)
	stmts         map[string]struct{}          // first statements prepared
	stale         []string                     // prepared statements to deallocate: see forgetIfStale
	// mode is the connection's pgx.ConnConfig.DefaultQueryExecMode and
	// tracer its Tracer, if it traces batches (its Config method copies
	// the whole configuration).
	mode   pgx.QueryExecMode
	tracer pgx.BatchTracer
	// Encoders of a prelude's and a first statement's arguments, kept
	// with the connection so that their buffers serve every transaction.
	preArgs, stmtArgs pgx.ExtendedQueryBuilder
	// The batches of a prelude's pipeline and of a commit (batch), kept
	// with the connection for the same reason.
	preBatch, commitBatch batch
}

// preparedOf returns the connection's prepared, kept in its CustomData.
func preparedOf(pc *pgx.Conn) *prepared {
	data := pc.PgConn().CustomData()
	st, ok := data["pgpipe"].(*prepared)
	if !ok {
		cfg := pc.Config()
		st = &prepared{stmts: map[string]struct{}{}, mode: cfg.DefaultQueryExecMode}
		st.tracer, _ = cfg.Tracer.(pgx.BatchTracer)
		data["pgpipe"] = st
	}
	return st
}

// state returns the prepared of c's connection.
func (c *Conn) state() *prepared {
	if c.st == nil {
		c.st = preparedOf(c.Conn.Conn())
	}
	return c.st
}

// prepareFirst prepares the BEGIN and query on the connection, or reports
// (false) that query cannot go in a pipeline behind a prelude.
func (c *Conn) prepareFirst(ctx context.Context, query string, args []any) (firstStatements, bool, error) {
	var sds firstStatements
	pc := c.Conn.Conn()
	st := c.state()
	switch st.mode {
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
	for len(st.stale) > 0 {
		if err := pc.Deallocate(ctx, st.stale[0]); err != nil {
			return sds, false, badConn(err)
		}
		st.stale = st.stale[1:]
	}
	if _, ok := st.stmts[query]; !ok && len(st.stmts) >= maxPrepared {
		return sds, false, nil
	}
	begin, err := st.prepareOwn(ctx, pc, &st.begin, "BEGIN")
	if err != nil {
		return sds, false, badConn(err)
	}
	sd, err := pc.Prepare(ctx, query, query) // pgx keeps it: a map lookup after the first time
	if err != nil {
		return sds, false, badConn(err)
	}
	st.stmts[query] = struct{}{}
	return firstStatements{begin: begin, stmt: sd}, true, nil
}

// prepareOwn returns *sd, a statement of pgpipe's own (BEGIN, COMMIT),
// preparing it on the connection the first time.
func (st *prepared) prepareOwn(ctx context.Context, pc *pgx.Conn, sd **pgconn.StatementDescription, query string) (*pgconn.StatementDescription, error) {
	if *sd == nil {
		p, err := pc.Prepare(ctx, query, query)
		if err != nil {
			return nil, err
		}
		*sd = p
	}
	return *sd, nil
}

// forgetIfStale drops a prepared statement the server refused to run
// because its tables changed under it ("cached plan must not change result
// type"): it is deallocated before the next first statement and prepared
// again when next sent.
func (c *Conn) forgetIfStale(sd *pgconn.StatementDescription, err error) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "0A000" {
		st := c.state()
		delete(st.stmts, sd.SQL)
		st.stale = append(st.stale, sd.SQL)
	}
}
