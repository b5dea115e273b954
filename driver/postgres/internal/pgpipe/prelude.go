package pgpipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// A Prelude sends statements of its own ahead of a transaction's BEGIN, in
// the pipeline of the transaction's first statement (Conn.BeginLazy):
//
//	prelude's statements · BEGIN · first statement · Sync
//
// An error among the prelude's statements makes the server skip the rest
// up to the Sync, which ends the implicit transaction they ran in: no
// transaction opens, and the first statement does not run. Otherwise the
// BEGIN turns that implicit transaction into the one begun, so that what
// the prelude's statements did (their locks, say) lasts until it ends.
type Prelude interface {
	// Before is called once, when the transaction's first statement is
	// about to be sent (not at all if the transaction ends first). It may
	// send its statements with p.Send and read their results with p.Next.
	//
	// A nil error sends the transaction's BEGIN and first statement:
	// behind the prelude's statements if Send sent them, else as a
	// pipeline of their own. An error refuses the transaction: the
	// server's is rolled back if it began, and the first statement and
	// every later one fail with the error, until the transaction's end
	// (COMMIT, ROLLBACK, END or ABORT), which succeeds and sends nothing.
	Before(ctx context.Context, p *Pipeline) error
}

// ErrNotSent is Pipeline.Send's error when the prelude's statements cannot
// go in the first statement's pipeline, and nothing was sent: the
// connection does not prepare statements (its pgx exec mode is neither
// QueryExecModeCacheStatement nor CacheDescribe: e.g. the simple
// protocol), the first statement's arguments start with a pgx query
// option, the connection prepared its maximum of first statements to send
// this way, it could not prepare the prelude's, or Send was called before.
var ErrNotSent = errors.New("pgpipe: the statements cannot go in the pipeline")

// Pipeline is the pipeline of a transaction's first statement, as a
// Prelude's Before sees it.
type Pipeline struct {
	c         *Conn
	sds       firstStatements
	pipelined bool
	res       *pgconn.MultiResultReader // once sent
	// quiet is the context Send runs the batch on when its ctx is bound,
	// the statement's (see sendPrelude): bound itself, or, when the
	// deadline is tied to the socket, one pgconn has nothing to watch in.
	bound, quiet context.Context
	sent         int  // the prelude's statements sent
	read         int  // their results read
	ended        bool // by End
}

// Send sends stmts, the transaction's BEGIN and its first statement in one
// pipeline, one round trip, ended by a Sync; Next then reads stmts'
// results. Each statement is prepared on the connection the first time it
// is sent (a round trip, as pgx takes for any new statement), then kept for
// the connection's life.
func (p *Pipeline) Send(ctx context.Context, stmts ...Statement) error {
	if !p.pipelined || p.res != nil {
		return ErrNotSent
	}
	pc := p.c.Conn.Conn()
	var sdsBuf [4]*pgconn.StatementDescription
	sds := sdsBuf[:0]
	for _, s := range stmts {
		sd, err := pc.Prepare(ctx, s.SQL, s.SQL) // pgx keeps it: a map lookup after the first time
		if err != nil {
			return fmt.Errorf("%w: prepare: %w", ErrNotSent, err)
		}
		sds = append(sds, sd)
	}
	m := pc.TypeMap()
	// One batch, one write: Bind and Execute of each prepared statement,
	// then a Sync. (pgconn's Pipeline would do the same with a dozen
	// allocations of bookkeeping per statement.) The batch is the
	// connection's, emptied (batch).
	st := p.c.state()
	kept := &st.preBatch
	b := kept.reset(pc.PgConn())
	for i, s := range stmts {
		a := &st.preArgs
		if err := a.Build(m, sds[i], s.Args); err != nil {
			return fmt.Errorf("%w: encode statement %d: %w", ErrNotSent, i, err)
		}
		// The batch keeps the result formats until it reads the results,
		// and the next Build reuses them: a copy each.
		b.ExecStatement(sds[i], a.ParamValues, a.ParamFormats, kept.keep(a.ResultFormats))
	}
	b.ExecStatement(p.sds.begin, nil, nil, nil)
	a := &st.stmtArgs
	b.ExecStatement(p.sds.stmt, a.ParamValues, a.ParamFormats, a.ResultFormats)
	p.sent = len(stmts)
	// Should the batch not go out, the connection is closed, and with it
	// whatever the server began; the error is the first Next's.
	if ctx == p.bound {
		ctx = p.quiet
	}
	p.res = pc.PgConn().ExecBatch(ctx, b)
	return nil
}

// Next returns the results of the next of the statements Send sent, for
// the caller to read and close.
func (p *Pipeline) Next() (*pgconn.ResultReader, error) {
	if p.read >= p.sent || p.ended {
		return nil, errors.New("pgpipe: no more of the prelude's results")
	}
	p.read++
	return nextResults(p.res)
}

// End ends the pipeline Send sent, reading what is left of its results up
// to its Sync, and returns the connection, for the prelude to send
// statements of its own on before Before returns. When one of the
// prelude's statements failed, the server skipped the rest and ended the
// implicit transaction they ran in: the connection is idle, with nothing
// of theirs left (their transaction-scoped locks are gone). Before must
// then refuse the transaction. End's error is one that broke the
// connection.
func (p *Pipeline) End() (*pgx.Conn, error) {
	if p.res == nil {
		return nil, errors.New("pgpipe: End before Send")
	}
	p.ended = true
	pc := p.c.Conn.Conn()
	if err := p.res.Close(); err != nil && pc.IsClosed() {
		return nil, err
	}
	return pc, nil
}

// TypeMap is the connection's, for decoding the values Next's results
// hold.
func (p *Pipeline) TypeMap() *pgtype.Map { return p.c.Conn.Conn().TypeMap() }

// nextResults returns the results of the next statement in res. The
// reader is the connection's one: it is good until the next call.
func nextResults(res *pgconn.MultiResultReader) (*pgconn.ResultReader, error) {
	if !res.NextResult() {
		if err := res.Close(); err != nil {
			return nil, err
		}
		return nil, errors.New("pgpipe: the server sent fewer results than statements")
	}
	return res.ResultReader(), nil
}

// sendPrelude sends the pending transaction's first statement behind its
// prelude's statements (see Prelude) and returns its results. sent is
// false when nothing was sent because the prelude sent no statements and
// let the transaction go ahead: the caller then sends the statement with
// its BEGIN.
func (c *Conn) sendPrelude(ctx context.Context, query string, args []any) (br begun, err error, sent bool) {
	pc := c.Conn.Conn()
	sds, pipelined, err := c.prepareFirst(ctx, query, args)
	if err != nil {
		c.pending = false
		return nil, err, true
	}
	if pipelined {
		// Encode the statement's arguments before the prelude runs: an
		// argument that cannot be sent fails the statement alone.
		if err := c.state().stmtArgs.Build(pc.TypeMap(), sds.stmt, args); err != nil {
			c.pending = false
			return nil, err, true
		}
	}
	p := &Pipeline{c: c, sds: sds, pipelined: pipelined}
	// The statement's deadline (oke's, deadline.Statement) is tied to the
	// socket until its results are read (pipeResults.Close), not watched
	// by pgconn. The prelude gets ctx itself, for what it sends elsewhere.
	var tie Tie
	p.bound = ctx
	p.quiet, tie = TieDeadline(ctx, pc)
	if err := c.prelude.Before(ctx, p); err != nil {
		err = c.refuse(ctx, p.res, err)
		tie.Untie()
		return nil, err, true
	}
	if p.res == nil {
		tie.Untie()
		return nil, nil, false
	}
	if p.ended {
		err := c.refuse(ctx, p.res, errors.New("pgpipe: the prelude ended its pipeline, yet let the transaction go ahead"))
		tie.Untie()
		return nil, err, true
	}
	c.pending = false
	for p.read < p.sent { // what the prelude left unread
		if err := readClosed(p); err != nil {
			p.res.Close()
			tie.Untie()
			return nil, err, true
		}
	}
	if rr, err := nextResults(p.res); err != nil { // the BEGIN
		p.res.Close()
		tie.Untie()
		return nil, err, true
	} else if _, err := rr.Close(); err != nil {
		p.res.Close()
		tie.Untie()
		return nil, err, true
	}
	br, err, sent = c.readFirst(p.res, sds.stmt, pc.TypeMap())
	if err != nil {
		tie.Untie()
		return br, err, sent
	}
	br.(*pipeResults).tie = tie
	return br, nil, sent
}

func readClosed(p *Pipeline) error {
	rr, err := p.Next()
	if err != nil {
		return err
	}
	_, err = rr.Close()
	return err
}

// refuse reads what is left of res, if it was sent, and refuses the
// transaction with err; should the server have begun it, it is rolled back
// first.
func (c *Conn) refuse(ctx context.Context, res *pgconn.MultiResultReader, err error) error {
	if res != nil {
		res.Close()
	}
	pc := c.Conn.Conn()
	if !pc.IsClosed() && pc.PgConn().TxStatus() != 'I' {
		if _, rerr := pc.Exec(ctx, "ROLLBACK"); rerr != nil {
			c.pending = false
			return badConn(rerr)
		}
	}
	c.pending, c.refused = false, err
	return err
}

// readFirst returns the results of the first statement of a transaction
// sent behind its prelude, for the caller to read.
func (c *Conn) readFirst(res *pgconn.MultiResultReader, sd *pgconn.StatementDescription, m *pgtype.Map) (begun, error, bool) {
	rr, err := nextResults(res)
	if err != nil {
		c.forgetIfStale(sd, err)
		res.Close()
		return nil, err, true
	}
	return &pipeResults{c: c, sd: sd, res: res, rr: rr, m: m}, nil, true
}

// pipeResults are the results of the statement sendPrelude sent: the
// statement's, then the pipeline's final Sync.
type pipeResults struct {
	c    *Conn
	sd   *pgconn.StatementDescription
	res  *pgconn.MultiResultReader
	rr   *pgconn.ResultReader
	m    *pgtype.Map
	rows pgx.Rows
	// tie is the statement's deadline tied to the socket, untied once
	// its results are read (see sendPrelude).
	tie Tie
}

func (r *pipeResults) Exec() (pgconn.CommandTag, error) {
	tag, err := r.rr.Close()
	if err != nil {
		r.c.forgetIfStale(r.sd, err)
	}
	return tag, err
}

func (r *pipeResults) Query() (pgx.Rows, error) {
	r.rows = pgx.RowsFromResultReader(r.m, r.rr)
	return r.rows, nil
}

func (r *pipeResults) Close() error {
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
	if cerr := r.res.Close(); err == nil {
		err = cerr
	}
	r.tie.Untie()
	r.tie = Tie{}
	return err
}
