package oke

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke/internal/deadline"
	"github.com/okengine/oke/internal/flowtx"
)

// DB is what Fx.Store wraps: *sql.DB satisfies it.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Store is a database handle whose statements are recorded as effects. Each
// statement is classified by what it does, not by the method that sends it:
// an INSERT … RETURNING sent with QueryRow is a write; a SELECT sent with
// Exec is a read. See ClassifySQL.
type Store struct {
	fx *Fx
	db DB
}

// Store wraps db so that its statements are recorded as read or write
// effects of the running flow.
func (fx *Fx) Store(db DB) *Store { return &Store{fx: fx, db: db} }

func (s *Store) note(query string) error { return s.fx.record(classified(query)) }

// statementTimeout is how long one statement of the flow's own may wait for
// its database: Config.StoreTimeout.
func (fx *Fx) statementTimeout() time.Duration {
	if fx == nil || fx.app == nil {
		return 0
	}
	return fx.app.cfg.StoreTimeout
}

// statement bounds a statement sent through Store or Tx on ctx by
// Config.StoreTimeout, unless ctx has a deadline of its own (a flow's
// Options.Timeout, or one the flow set): a database that stops answering
// fails the statement with an error that is driver.ErrUnavailable (and
// context.DeadlineExceeded), so the request gets a prompt 503 instead of
// waiting for as long as the database hangs. The deadline covers the
// statement and the reading of its rows; release (nil when there is no
// deadline) ends it. A statement with rows keeps its deadline until the
// flow's function returns (Fx.releaseStatements), when its rows are read
// or can no longer be: one without rows calls release once it returned.
func (fx *Fx) statement(ctx context.Context, rows bool) (_ context.Context, release func()) {
	ctx, release = deadline.Statement(ctx, fx.statementTimeout())
	if release != nil && rows {
		fx.root().holdStatement(release)
	}
	return ctx, release
}

// holdStatement keeps the release of a statement's deadline until the
// flow's function returns, when callUnary calls releaseStatements. Outside
// callUnary (a stream's flow) the statement is left to its deadline or its
// context's end, whichever comes first: the request's, for a stream.
func (fx *Fx) holdStatement(release func()) {
	fx.txMu.Lock()
	defer fx.txMu.Unlock()
	if fx.stmts != nil {
		fx.stmts = append(fx.stmts, release)
	}
}

// holding is the empty, not nil, list of releases of holdStatements.
var holding = make([]func(), 0)

// holdStatements starts keeping the releases of the deadlines of fx's
// statements with rows; releaseStatements, once the flow's function
// returned, calls them.
func (fx *Fx) holdStatements() {
	fx.txMu.Lock()
	fx.stmts = holding
	fx.txMu.Unlock()
}

// releaseStatements ends the deadlines of the statements with rows that
// fx's flow sent (their rows are read by now, or never will be) and stops
// holding new ones.
func (fx *Fx) releaseStatements() {
	fx.txMu.Lock()
	stmts := fx.stmts
	fx.stmts = nil
	fx.txMu.Unlock()
	for _, release := range stmts {
		release()
	}
}

// Exec runs a statement that returns no rows.
func (s *Store) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := s.note(query); err != nil {
		return nil, err
	}
	ctx, release := s.fx.statement(ctx, false)
	res, err := s.db.ExecContext(ctx, query, args...)
	if release != nil {
		release()
	}
	return res, err
}

// Query runs a statement that returns rows.
func (s *Store) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := s.note(query); err != nil {
		return nil, err
	}
	ctx, _ = s.fx.statement(ctx, true)
	return s.db.QueryContext(ctx, query, args...)
}

// QueryRow runs a statement that returns at most one row.
func (s *Store) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if err := s.note(query); err != nil {
		return errRow(err)
	}
	ctx, _ = s.fx.statement(ctx, true)
	return s.db.QueryRowContext(ctx, query, args...)
}

// Tx runs fn in a transaction: it commits when fn returns nil and rolls back
// otherwise (also when fn panics). Statements inside are classified one by
// one, like Store's.
func (s *Store) Tx(ctx context.Context, opts *sql.TxOptions, fn func(tx *Tx) error) (err error) {
	// database/sql keeps the context a transaction began on until it ends:
	// its BEGIN and COMMIT are bounded by arming it for each (see
	// Fx.statement), not the statements between them.
	var armed *deadline.Armed
	if d := s.fx.statementTimeout(); d > 0 {
		if _, ok := ctx.Deadline(); !ok {
			armed = deadline.NewArmed(ctx)
			armed.Arm(d)
			ctx = armed
		}
	}
	sqlTx, err := s.db.BeginTx(ctx, opts)
	if armed != nil {
		err = armed.Disarm(err)
	}
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	done := false
	defer func() {
		if !done {
			sqlTx.Rollback()
		}
	}()
	if err := fn(&Tx{fx: s.fx, tx: sqlTx}); err != nil {
		return err
	}
	done = true
	if armed != nil {
		armed.Arm(s.fx.statementTimeout())
	}
	err = sqlTx.Commit()
	if armed != nil {
		err = armed.Disarm(err)
	}
	if err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// Tx is a transaction: the flow's own (Fx.Tx), or one opened by Store.Tx.
type Tx struct {
	fx      *Fx
	tx      flowtx.Queryer
	pending *flowtx.Tx // the flow's transaction: effects count once it commits
}

// note records the statement's effect: on the flow's transaction, to count
// once it commits (a deferred claim goes with its first statement, see
// driver.TxClaimer); on a Store.Tx, on the flow at once.
func (t *Tx) note(query string) error {
	e := classified(query)
	if t.pending != nil {
		t.pending.Note(effectBits[e])
		return nil
	}
	return t.fx.record(e)
}

// stmt is a statement on a Tx: its context, and how its error is marked
// when a deadline ended it.
type stmt struct {
	ctx     context.Context // the statement's, bounded
	send    context.Context // what database/sql gets: ctx, or ctx hushed (flowtx.Tx.Hush)
	release func()          // the statement's deadline's (Fx.statement), or nil
	armed   *deadline.Armed // the BEGIN's, on the flow transaction's first statement (flowtx.Tx.First)
}

// begin starts a statement on t: bounded by Config.StoreTimeout
// (Fx.statement). The first statement of the flow's transaction carries
// its BEGIN (flowtx.Tx.First): that bound covers it too, or, when ctx has
// a deadline of its own, the BEGIN gets Config.StoreTimeout's alone.
func (t *Tx) begin(ctx context.Context, rows bool) stmt {
	var s stmt
	s.ctx, s.release = t.fx.statement(ctx, rows)
	s.send = s.ctx
	if t.pending != nil {
		s.ctx, s.armed = t.pending.First(s.ctx, s.release != nil)
		s.send = t.pending.Hush(s.ctx)
	}
	return s
}

// end returns the statement's error, marked deadline.ErrTimeout when a
// deadline ended it.
func (s stmt) end(err error) error {
	if s.armed != nil {
		return s.armed.Disarm(err)
	}
	return deadline.Marked(s.ctx, err)
}

// Exec runs a statement that returns no rows.
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.note(query); err != nil {
		return nil, err
	}
	s := t.begin(ctx, false)
	res, err := t.tx.ExecContext(s.send, query, args...)
	err = s.end(err)
	if s.release != nil {
		s.release()
	}
	return res, err
}

// Query runs a statement that returns rows.
func (t *Tx) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.note(query); err != nil {
		return nil, err
	}
	s := t.begin(ctx, true)
	rows, err := t.tx.QueryContext(s.send, query, args...)
	return rows, s.end(err)
}

// QueryRow runs a statement that returns at most one row.
func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if err := t.note(query); err != nil {
		return errRow(err)
	}
	s := t.begin(ctx, true)
	row := t.tx.QueryRowContext(s.send, query, args...)
	if err := row.Err(); err != nil {
		if marked := s.end(err); marked != err { // a deadline ended it
			return errRow(marked)
		}
		return row
	}
	s.end(nil)
	return row
}

// errRow is a *sql.Row whose Scan returns err: database/sql has no other
// way to make one than a query on a connection that fails to open.
func errRow(err error) *sql.Row {
	db := sql.OpenDB(errConnector{err})
	defer db.Close()
	return db.QueryRowContext(context.Background(), "")
}

// errConnector is a database/sql connector whose every connection fails
// with err.
type errConnector struct{ err error }

func (c errConnector) Connect(context.Context) (sqldriver.Conn, error) { return nil, c.err }
func (c errConnector) Driver() sqldriver.Driver                        { return errDriver{c.err} }

type errDriver struct{ err error }

func (d errDriver) Open(string) (sqldriver.Conn, error) { return nil, d.err }

// ClassifySQL says whether a SQL statement reads (EffectRead) or changes
// (EffectWrite) the database. Reads are SELECT, VALUES, TABLE, SHOW,
// EXPLAIN (without ANALYZE), DESCRIBE, transaction control and SET; a WITH
// query is a read unless it holds INSERT, UPDATE, DELETE or MERGE; SELECT …
// INTO is a write. Anything else, or anything it cannot tell, is a write:
// erring that way never lets a flow run twice.
func ClassifySQL(query string) Effect {
	toks := sqlWords(query, 0)
	if len(toks) == 0 {
		return EffectWrite
	}
	switch toks[0] {
	case "SELECT":
		if hasWord(query, "INTO") {
			return EffectWrite
		}
		return readUnlessModifying(query)
	case "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC",
		"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE", "SET":
		return EffectRead
	case "WITH":
		return readUnlessModifying(query)
	case "EXPLAIN":
		if len(toks) > 1 && (toks[1] == "ANALYZE" || toks[1] == "ANALYSE") {
			return readUnlessModifying(query)
		}
		return EffectRead
	case "PRAGMA":
		if strings.Contains(query, "=") {
			return EffectWrite
		}
		return EffectRead
	}
	return EffectWrite
}

// classifiedMax bounds how many statements classified remembers: an app
// that builds its SQL at run time sends more distinct statements than
// that, and the rest are classified each time.
const classifiedMax = 4096

// classifiedSQL holds what ClassifySQL said of the statements flows sent
// (string → Effect); classifiedN counts them.
var (
	classifiedSQL sync.Map
	classifiedN   atomic.Int64
)

// classified is ClassifySQL(query), remembered for the first classifiedMax
// statements: a flow sends the same constant statements request after
// request, and the lookup allocates nothing.
func classified(query string) Effect {
	if e, ok := classifiedSQL.Load(query); ok {
		return e.(Effect)
	}
	e := ClassifySQL(query)
	if classifiedN.Load() < classifiedMax {
		if _, loaded := classifiedSQL.LoadOrStore(query, e); !loaded {
			classifiedN.Add(1)
		}
	}
	return e
}

func readUnlessModifying(query string) Effect {
	prev := ""
	for _, w := range sqlWords(query, -1) {
		switch w {
		case "UPDATE":
			// SELECT … FOR UPDATE / FOR NO KEY UPDATE only locks.
			if prev != "FOR" && prev != "KEY" {
				return EffectWrite
			}
		case "INSERT", "DELETE", "MERGE", "NEXTVAL", "SETVAL":
			return EffectWrite
		}
		prev = w
	}
	return EffectRead
}

func hasWord(query, word string) bool {
	for _, w := range sqlWords(query, -1) {
		if w == word {
			return true
		}
	}
	return false
}

// sqlWords returns the upper-cased bare words of query, skipping comments,
// string literals and quoted identifiers. max bounds how many (0 means 2).
func sqlWords(q string, max int) []string {
	if max == 0 {
		max = 2
	}
	var words []string
	i := 0
	for i < len(q) && (max < 0 || len(words) < max) {
		c := q[i]
		switch {
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			end := strings.Index(q[i+2:], "*/")
			if end < 0 {
				return words
			}
			i += end + 4
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(q) && q[j] != c {
				j++
			}
			i = j + 1
		case c == '$' && i+1 < len(q) && (q[i+1] == '$' || isWordByte(q[i+1])):
			// Postgres dollar quoting: $$…$$ or $tag$…$tag$; $1 is a parameter.
			j := i + 1
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			if j < len(q) && q[j] == '$' && !(j > i+1 && q[i+1] >= '0' && q[i+1] <= '9') {
				tag := q[i : j+1]
				end := strings.Index(q[j+1:], tag)
				if end < 0 {
					return words
				}
				i = j + 1 + end + len(tag)
			} else {
				i = j
			}
		case isWordByte(c):
			j := i
			for j < len(q) && isWordByte(q[j]) {
				j++
			}
			words = append(words, strings.ToUpper(q[i:j]))
			i = j
		default:
			i++
		}
	}
	return words
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
