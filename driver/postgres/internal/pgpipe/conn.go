// Package pgpipe is a database/sql driver over pgx's connections that
// sends a transaction's BEGIN in one pipeline with its first statement,
// and lets the caller put statements of its own ahead of that BEGIN (a
// Prelude) and ahead of the COMMIT (Conn.Commit).
//
// It knows nothing of what those statements mean: the Postgres driver of
// oke uses it for its claims and completions.
//
// The connections of a DB that OpenDB returns are pgx's database/sql
// connections (stdlib.Conn) wrapped in a Conn. A Conn with no transaction
// begun by Conn.BeginLazy behaves exactly as pgx's. One begun by BeginLazy sends
// nothing until its first statement, which goes in one pipeline with the
// BEGIN: one round trip where a BEGIN of its own made two. What the
// statements can see is the same — Postgres takes a transaction's snapshot
// at its first statement, not at BEGIN — except now(), the transaction's
// timestamp, which is the time of that first statement.
//
// On a connection that prepares its statements (pgx's default exec mode,
// QueryExecModeCacheStatement, or CacheDescribe) the prelude's and
// Commit's statements are prepared once per connection and sent as one
// pgconn.Batch: one write and one Sync, read back with a
// MultiResultReader, without the per-statement bookkeeping of pgconn's
// Pipeline. What this package's connections keep between transactions
// (the statements prepared, the argument encoders' buffers, the batches
// themselves: see batch) lives with the pgx connection, in its CustomData,
// since database/sql drops a Conn each time it goes back to the pool. The
// prelude's statements are not
// seen by a pgx tracer; Commit's are, as one batch.
package pgpipe

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/okengine/oke/internal/deadline"
)

// OpenDB returns a database/sql handle on pool: pgx's database/sql adapter
// (stdlib.GetPoolConnector), its connections wrapped in Conn, which is what
// (*sql.Conn).Raw hands out. As with stdlib.OpenDBFromPool, the pool keeps
// the idle connections, not database/sql.
func OpenDB(pool *pgxpool.Pool) *sql.DB {
	pc := stdlib.GetPoolConnector(pool)
	db := sql.OpenDB(connector{Connector: pc, drv: &unhushing{pc.Driver()}})
	db.SetMaxIdleConns(0)
	return db
}

type connector struct {
	sqldriver.Connector
	drv *unhushing
}

// Driver is the connector's driver, which says it unhushes (oke's
// deadline.Hush) the context of every statement.
func (c connector) Driver() sqldriver.Driver { return c.drv }

// unhushing is pgx's database/sql driver, as a connector of OpenDB's has
// it: Conn's ExecContext, QueryContext and PrepareContext call
// deadline.Unhush on their context.
type unhushing struct{ sqldriver.Driver }

func (*unhushing) UnhushesStatements() {}

func (c connector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		dc.Close()
		return nil, fmt.Errorf("pgpipe: the pool's connection is a %T, not pgx's", dc)
	}
	return &Conn{Conn: sc}, nil
}

// Conn is a connection of a DB from OpenDB (a database/sql/driver.Conn): a
// pgx database/sql connection whose transaction may be begun (BeginLazy) but
// not yet sent. Its next statement then carries the BEGIN, behind the
// statements of the transaction's Prelude, if any.
type Conn struct {
	*stdlib.Conn
	pending bool    // begun, BEGIN not sent
	prelude Prelude // of the transaction begun, until it ends
	// refused is the Prelude's error: no transaction is open, and every
	// statement but its end fails with it.
	refused error
	st      *prepared // the connection's, once asked for (state)
}

// maxPrepared bounds the statements a connection prepares to send behind a
// Prelude (each stays prepared for the connection's life); past it, a new
// statement goes without the prelude's statements (Pipeline.Send fails
// with ErrNotSent).
const maxPrepared = 256

// BeginLazy begins a transaction on c without a round trip: the BEGIN goes with
// the first statement sent on c (or not at all, if the transaction ends
// before any: it then has nothing to commit or roll back). p, if not nil,
// is called before that statement is sent (see Prelude). It fails when c is
// already in a transaction.
func (c *Conn) BeginLazy(p Prelude) error {
	if c.pending || c.refused != nil || c.Conn.Conn().PgConn().TxStatus() != 'I' {
		return errors.New("pgpipe: the connection is already in a transaction")
	}
	c.pending, c.prelude = true, p
	return nil
}

// Prelude returns the Prelude given to BeginLazy for c's transaction, until the
// transaction ends (a COMMIT, ROLLBACK, END or ABORT statement, Commit, or
// c's return to its pool): nil after.
func (c *Conn) Prelude() Prelude { return c.prelude }

// Statement is a statement and its arguments, sent in a pipeline.
type Statement struct {
	SQL  string
	Args []any
}

// Commit ends c's transaction: stmts and a COMMIT go to the server as one
// pipeline, one round trip (behind the BEGIN, if the transaction sent
// nothing yet). It returns the first error among their results: the
// server then skipped the rest and the transaction is not committed but
// still open, failed, for the caller to roll back (unless the connection is
// gone). A transaction its Prelude refused fails with the refusal, and
// nothing is sent.
func (c *Conn) Commit(ctx context.Context, stmts ...Statement) error {
	if err := c.refused; err != nil {
		return err
	}
	pending := c.pending
	c.pending, c.prelude = false, nil
	switch c.state().mode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		return c.commitPrepared(ctx, pending, stmts)
	}
	b := commitBatch(pending, stmts)
	br := c.Conn.Conn().SendBatch(ctx, b)
	var first error
	for range b.Len() {
		if _, err := br.Exec(); err != nil && first == nil {
			first = err
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// commitBatch is what Commit sends, as a pgx.Batch: a BEGIN when the
// transaction sent nothing yet (pending: it begins here), stmts, and the
// COMMIT.
func commitBatch(pending bool, stmts []Statement) *pgx.Batch {
	b := &pgx.Batch{}
	if pending {
		b.Queue("BEGIN")
	}
	for _, s := range stmts {
		b.Queue(s.SQL, s.Args...)
	}
	b.Queue("COMMIT")
	return b
}

// commitPrepared is Commit on a connection that prepares its statements:
// stmts and the COMMIT (behind a BEGIN when pending) are prepared
// statements in one batch, one write, one round trip. (pgx's SendBatch
// would do the same through a pgconn.Pipeline, with a dozen allocations of
// bookkeeping per statement.) A connection whose Tracer traces batches
// sees it as one, as from SendBatch.
func (c *Conn) commitPrepared(ctx context.Context, pending bool, stmts []Statement) (err error) {
	pc, st := c.Conn.Conn(), c.state()
	var trace func(i int, tag pgconn.CommandTag, err error)
	if st.tracer != nil {
		var end func(error)
		ctx, trace, end = c.traceCommit(ctx, pending, stmts)
		defer func() { end(err) }()
	}
	kept := &st.commitBatch
	b := kept.reset(pc.PgConn())
	if pending {
		sd, err := st.prepareOwn(ctx, pc, &st.begin, "BEGIN")
		if err != nil {
			return err
		}
		b.ExecStatement(sd, nil, nil, nil)
	}
	var sdsBuf [4]*pgconn.StatementDescription
	sds := sdsBuf[:0]
	m := pc.TypeMap()
	for _, s := range stmts {
		sd, err := pc.Prepare(ctx, s.SQL, s.SQL) // pgx keeps it: a map lookup after the first time
		if err != nil {
			return err
		}
		sds = append(sds, sd)
		a := &st.preArgs
		if err := a.Build(m, sd, s.Args); err != nil {
			return err
		}
		b.ExecStatement(sd, a.ParamValues, a.ParamFormats, kept.keep(a.ResultFormats))
	}
	sd, err := st.prepareOwn(ctx, pc, &st.commit, "COMMIT")
	if err != nil {
		return err
	}
	b.ExecStatement(sd, nil, nil, nil)
	// The COMMIT's deadline (oke's, deadline.Bound) is tied to the
	// socket, not watched by pgconn: one round trip, without a channel and
	// a context.AfterFunc for pgconn to watch it by.
	qctx, tie := TieDeadline(ctx, pc)
	defer tie.Untie()
	res := pc.PgConn().ExecBatch(qctx, b)
	var first error
	for i := 0; res.NextResult(); i++ {
		tag, err := res.ResultReader().Close()
		if trace != nil {
			trace(i, tag, err)
		}
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		if k := i - btoi(pending); k >= 0 && k < len(sds) {
			c.forgetIfStale(sds[k], err)
		}
	}
	if err := res.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// traceCommit tells the connection's batch tracer of commitPrepared's
// batch: it returns the context the tracer gave, trace, which tells it of
// the i-th statement's result, and end, of the batch's end.
func (c *Conn) traceCommit(ctx context.Context, pending bool, stmts []Statement) (context.Context, func(int, pgconn.CommandTag, error), func(error)) {
	pc, tr := c.Conn.Conn(), c.state().tracer
	b := commitBatch(pending, stmts)
	ctx = tr.TraceBatchStart(ctx, pc, pgx.TraceBatchStartData{Batch: b})
	trace := func(i int, tag pgconn.CommandTag, err error) {
		if i < len(b.QueuedQueries) {
			q := b.QueuedQueries[i]
			tr.TraceBatchQuery(ctx, pc, pgx.TraceBatchQueryData{SQL: q.SQL, Args: q.Arguments, CommandTag: tag, Err: err})
		}
	}
	end := func(err error) { tr.TraceBatchEnd(ctx, pc, pgx.TraceBatchEndData{Err: err}) }
	return ctx, trace, end
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// txEnd reports whether query only ends a transaction (COMMIT, ROLLBACK,
// END, ABORT): with BEGIN still pending there is nothing for it to end.
func txEnd(query string) bool {
	q := strings.TrimRight(strings.TrimSpace(query), "; \t\n")
	for _, w := range [...]string{"COMMIT", "ROLLBACK", "END", "ABORT"} {
		if strings.EqualFold(q, w) {
			return true
		}
	}
	return false
}

// ended handles a statement on a connection whose transaction is pending
// or was refused, when the statement only ends that transaction: there is
// none to end, and nothing is sent.
func (c *Conn) ended(query string) bool {
	if (!c.pending && c.refused == nil) || !txEnd(query) {
		return false
	}
	c.pending, c.prelude, c.refused = false, nil, nil
	return true
}

// ExecContext implements database/sql/driver.ExecerContext: query is sent
// pipelined behind a pending BEGIN.
func (c *Conn) ExecContext(ctx context.Context, query string, argsV []sqldriver.NamedValue) (sqldriver.Result, error) {
	ctx = deadline.Unhush(ctx)
	if c.ended(query) {
		return sqldriver.RowsAffected(0), nil
	}
	if c.refused != nil {
		return nil, c.refused
	}
	if !c.pending {
		if c.prelude != nil && txEnd(query) {
			c.prelude = nil // the transaction ends
		}
		// Nothing to read after it returns: its deadline is tied to the
		// socket for the call (TieDeadline) instead of watched by pgx.
		qctx, tie := TieDeadline(ctx, c.Conn.Conn())
		res, err := c.Conn.ExecContext(qctx, query, argsV)
		tie.Untie()
		return res, err
	}
	br, err := c.sendFirst(ctx, query, argsV)
	if err != nil {
		return nil, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return sqldriver.RowsAffected(tag.RowsAffected()), nil
}

// QueryContext implements database/sql/driver.QueryerContext: query is
// sent pipelined behind a pending BEGIN.
func (c *Conn) QueryContext(ctx context.Context, query string, argsV []sqldriver.NamedValue) (sqldriver.Rows, error) {
	ctx = deadline.Unhush(ctx)
	if c.refused != nil { // its end goes through ExecContext, as database/sql's does
		return nil, c.refused
	}
	if !c.pending {
		return c.Conn.QueryContext(ctx, query, argsV)
	}
	br, err := c.sendFirst(ctx, query, argsV)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	// Read the first row now, as pgx's adapter does: a statement that
	// fails reports it here, not at the first Next.
	more := rows.Next()
	if err := rows.Err(); err != nil {
		rows.Close()
		br.Close()
		return nil, err
	}
	return &firstRows{conn: c.Conn.Conn(), br: br, rows: rows, first: true, more: more}, nil
}

// PrepareContext implements database/sql/driver.ConnPrepareContext, with
// ctx unhushed (deadline.Unhush).
func (c *Conn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	return c.Conn.PrepareContext(deadline.Unhush(ctx), query)
}

// ResetSession implements database/sql/driver.SessionResetter: a BEGIN
// never sent is cleared, and the connection goes back to its pool with no
// transaction.
func (c *Conn) ResetSession(ctx context.Context) error {
	c.pending, c.prelude, c.refused = false, nil, nil
	return c.Conn.ResetSession(ctx)
}

// begun are the results of a transaction's first statement, sent with its
// BEGIN: the statement's, read with Exec or Query, and Close, which reads
// the rest of the pipeline. pgx.BatchResults is one.
type begun interface {
	Exec() (pgconn.CommandTag, error)
	Query() (pgx.Rows, error)
	Close() error
}

func values(argsV []sqldriver.NamedValue) []any {
	args := make([]any, len(argsV))
	for i, a := range argsV {
		args[i] = a.Value
	}
	return args
}

// sendFirst sends the pending transaction's first statement: behind its
// prelude's statements (sendPrelude) when it has a prelude that sends
// some, else with its BEGIN (sendBegun).
func (c *Conn) sendFirst(ctx context.Context, query string, argsV []sqldriver.NamedValue) (begun, error) {
	args := values(argsV)
	if c.prelude != nil {
		br, err, sent := c.sendPrelude(ctx, query, args)
		if sent {
			return br, err
		}
	}
	return c.sendBegun(ctx, query, args)
}

// sendBegun sends BEGIN and query as one pipeline and reads BEGIN's
// result; the caller reads query's from the returned results and closes
// them. The BEGIN counts as sent once the pipeline is: should it have
// failed, the transaction's end is still sent and finds none (a warning in
// Postgres, not an error).
func (c *Conn) sendBegun(ctx context.Context, query string, args []any) (begun, error) {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(query, args...)
	c.pending = false
	br := c.Conn.Conn().SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, badConn(err)
	}
	return br, nil
}

// badConn is err, or database/sql's ErrBadConn when nothing was sent, as
// pgx's own adapter says.
func badConn(err error) error {
	if pgconn.SafeToRetry(err) {
		return sqldriver.ErrBadConn
	}
	return err
}
