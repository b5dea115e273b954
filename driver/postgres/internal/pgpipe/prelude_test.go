package pgpipe_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
)

// prelude is a Prelude that sends stmts ahead of the BEGIN and refuses the
// transaction with errRefused when one of them fails; with no stmts it
// sends nothing. It records what it saw.
type prelude struct {
	stmts  []pgpipe.Statement
	calls  int
	sent   error // what Send returned
	failed error // the first statement's error, if any
	// after, when set, runs on the connection End returns once a
	// statement failed, before the refusal.
	after func(ctx context.Context, conn *pgx.Conn) error
}

var errRefused = errors.New("refused by the prelude")

func (p *prelude) Before(ctx context.Context, pipe *pgpipe.Pipeline) error {
	p.calls++
	if len(p.stmts) == 0 {
		return nil
	}
	if p.sent = pipe.Send(ctx, p.stmts...); p.sent != nil {
		if errors.Is(p.sent, pgpipe.ErrNotSent) {
			return nil
		}
		return p.sent
	}
	for range p.stmts {
		rr, err := pipe.Next()
		if err == nil {
			_, err = rr.Close()
		}
		if err != nil && p.failed == nil {
			p.failed = err
		}
	}
	if p.failed != nil {
		if p.after != nil {
			conn, err := pipe.End()
			if err != nil {
				return err
			}
			if err := p.after(ctx, conn); err != nil {
				return err
			}
		}
		return errRefused
	}
	return nil
}

// preludeOf returns conn's Conn.Prelude.
func preludeOf(t *testing.T, conn *sql.Conn) pgpipe.Prelude {
	t.Helper()
	var p pgpipe.Prelude
	if err := conn.Raw(func(dc any) error { p = dc.(*pgpipe.Conn).Prelude(); return nil }); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPrelude(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	table, count := f.table(t, "pre")
	begin := func(t *testing.T, p pgpipe.Prelude) *sql.Conn {
		t.Helper()
		conn, err := f.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if err := beginLazy(conn, p); err != nil {
			t.Fatal(err)
		}
		return conn
	}

	t.Run("its statements run in the transaction, ahead of the first statement", func(t *testing.T) {
		p := &prelude{stmts: []pgpipe.Statement{
			{SQL: `SELECT set_config('pgpipe.test', $1, true)`, Args: []any{"ahead"}}, // transaction-local
			{SQL: `SELECT 1`},
		}}
		conn := begin(t, p)
		if st := txStatus(t, conn); st != 'I' || p.calls != 0 {
			t.Fatalf("after BeginLazy: status %c, %d calls of Before; want I and none", st, p.calls)
		}
		var got string
		if err := conn.QueryRowContext(ctx, `SELECT current_setting('pgpipe.test')`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != "ahead" || p.calls != 1 || p.sent != nil || p.failed != nil {
			t.Fatalf("first statement saw %q (%d calls, Send %v, failed %v); want the prelude's setting, one call", got, p.calls, p.sent, p.failed)
		}
		if preludeOf(t, conn) != p {
			t.Fatal("Prelude() in the transaction is not the one given to BeginLazy")
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		if preludeOf(t, conn) != nil {
			t.Fatal("Prelude() after COMMIT is not nil")
		}
		if n := count(); n != 1 {
			t.Fatalf("%d rows after COMMIT, want 1", n)
		}
		// The setting was the transaction's: it ended with it.
		if err := conn.QueryRowContext(ctx, `SELECT current_setting('pgpipe.test', true)`).Scan(&got); err != nil || got != "" {
			t.Fatalf("after the transaction: %q, %v; want the setting gone", got, err)
		}
	})

	t.Run("a refusal: nothing of the transaction runs, its statements fail with the refusal, its end sends nothing", func(t *testing.T) {
		p := &prelude{stmts: []pgpipe.Statement{{SQL: `SELECT 1 / $1::int`, Args: []any{0}}}}
		conn := begin(t, p)
		_, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (2)`)
		var pgErr *pgconn.PgError
		if !errors.Is(err, errRefused) || !errors.As(p.failed, &pgErr) || pgErr.Code != "22012" {
			t.Fatalf("first statement: %v (prelude saw %v); want the refusal, after a division by zero", err, p.failed)
		}
		if st := txStatus(t, conn); st != 'I' {
			t.Fatalf("after the refusal: status %c, want I (no transaction)", st)
		}
		if _, err := conn.QueryContext(ctx, `SELECT 1`); !errors.Is(err, errRefused) {
			t.Errorf("a later query: %v, want the refusal", err)
		}
		if err := conn.Raw(func(dc any) error { return dc.(*pgpipe.Conn).Commit(ctx) }); !errors.Is(err, errRefused) {
			t.Errorf("Commit of a refused transaction: %v, want the refusal", err)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatalf("ROLLBACK after a refusal: %v", err)
		}
		if n := count(); n != 1 {
			t.Fatalf("%d rows, want 1: the refused INSERT never ran", n)
		}
		if p.calls != 1 {
			t.Errorf("Before called %d times, want once", p.calls)
		}
		if err := beginLazy(conn, nil); err != nil {
			t.Fatalf("BeginLazy after a refusal ended: %v", err)
		}
		conn.ExecContext(ctx, "ROLLBACK")
	})

	t.Run("after a failure, End gives the connection, idle, its locks gone, for statements of the prelude's own", func(t *testing.T) {
		var status byte
		var locks, after int
		p := &prelude{
			stmts: []pgpipe.Statement{
				{SQL: `SELECT pg_advisory_xact_lock(4242)`},
				{SQL: `SELECT 1 / $1::int`, Args: []any{0}},
				{SQL: `SELECT 1`}, // skipped
			},
			after: func(ctx context.Context, conn *pgx.Conn) error {
				status = conn.PgConn().TxStatus()
				return conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), 7`).Scan(&locks, &after)
			},
		}
		conn := begin(t, p)
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (5)`); !errors.Is(err, errRefused) {
			t.Fatalf("first statement: %v (prelude saw %v); want the refusal", err, p.failed)
		}
		if status != 'I' || locks != 0 || after != 7 {
			t.Fatalf("on End's connection: status %c, %d advisory locks, query gave %d; want I, none, 7", status, locks, after)
		}
		if st := txStatus(t, conn); st != 'I' {
			t.Fatalf("after the refusal: status %c, want I", st)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Fatalf("%d rows, want 1: the refused INSERT never ran", n)
		}
		if err := beginLazy(conn, nil); err != nil {
			t.Fatalf("BeginLazy after End and a refusal: %v", err)
		}
		conn.ExecContext(ctx, "ROLLBACK")
	})

	t.Run("a prelude that sends nothing lets BEGIN and the statement go as without one", func(t *testing.T) {
		p := &prelude{}
		conn := begin(t, p)
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (3)`); err != nil {
			t.Fatal(err)
		}
		if st := txStatus(t, conn); st != 'T' || p.calls != 1 {
			t.Fatalf("status %c, %d calls; want T, one call", st, p.calls)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Fatalf("%d rows after ROLLBACK, want 1", n)
		}
	})

	t.Run("a transaction ended before its first statement never calls Before", func(t *testing.T) {
		p := &prelude{stmts: []pgpipe.Statement{{SQL: `SELECT 1`}}}
		conn := begin(t, p)
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if p.calls != 0 || preludeOf(t, conn) != nil {
			t.Fatalf("%d calls, Prelude() %v; want none, nil", p.calls, preludeOf(t, conn))
		}
	})
}

// TestCommit runs on a connection that prepares its statements (pgx's
// default: Commit sends prepared statements in one batch) and on one that
// does not (the simple protocol: pgx's SendBatch).
func TestCommit(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "simple_protocol"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			testCommit(t, setupWith(t, mode))
		})
	}
}

func testCommit(t *testing.T, f fixture) {
	ctx := t.Context()
	table, count := f.table(t, "com")
	commit := func(conn *sql.Conn, stmts ...pgpipe.Statement) error {
		return conn.Raw(func(dc any) error { return dc.(*pgpipe.Conn).Commit(ctx, stmts...) })
	}
	insert := func(id int) pgpipe.Statement {
		return pgpipe.Statement{SQL: `INSERT INTO ` + table + ` VALUES ($1)`, Args: []any{id}}
	}

	t.Run("its statements commit with the transaction, begun or not", func(t *testing.T) {
		conn := begun(t, f)
		if err := commit(conn, insert(1)); err != nil { // nothing sent yet: BEGIN goes with them
			t.Fatal(err)
		}
		conn = begun(t, f)
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (2)`); err != nil {
			t.Fatal(err)
		}
		if err := commit(conn, insert(3)); err != nil {
			t.Fatal(err)
		}
		if st := txStatus(t, conn); st != 'I' {
			t.Fatalf("after Commit: status %c, want I", st)
		}
		if n := count(); n != 3 {
			t.Fatalf("%d rows, want 3", n)
		}
	})

	t.Run("a failing statement skips the COMMIT and leaves the transaction for the caller to roll back", func(t *testing.T) {
		conn := begun(t, f)
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (4)`); err != nil {
			t.Fatal(err)
		}
		err := commit(conn, insert(1)) // taken
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("Commit: %v, want the unique violation", err)
		}
		if st := txStatus(t, conn); st != 'E' {
			t.Fatalf("after a failed Commit: status %c, want E", st)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 3 {
			t.Fatalf("%d rows, want 3: the transaction's INSERT rolled back", n)
		}
	})
}

// Without prepared statements (pgx's simple protocol) nothing goes ahead
// of the BEGIN: Send says ErrNotSent, and the transaction goes as one
// without a prelude.
func TestPreludeWithoutPreparedStatements(t *testing.T) {
	t.Parallel()
	f := setupWith(t, "simple_protocol")
	ctx := t.Context()
	p := &prelude{stmts: []pgpipe.Statement{{SQL: `SELECT 1`}}}
	conn, err := f.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := beginLazy(conn, p); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT 7`).Scan(&n); err != nil || n != 7 {
		t.Fatalf("first statement: %d, %v", n, err)
	}
	if !errors.Is(p.sent, pgpipe.ErrNotSent) || p.calls != 1 {
		t.Fatalf("Send: %v (%d calls), want ErrNotSent, one call", p.sent, p.calls)
	}
	if st := txStatus(t, conn); st != 'T' {
		t.Fatalf("status %c, want T", st)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}
