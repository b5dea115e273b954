package pgpipe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver/postgres/internal/pgpipe"
	"github.com/okengine/oke/internal/pgtest"
)

// TestMain fails the package's tests when any leave a goroutine running.
func TestMain(m *testing.M) { pgtest.Main(m) }

// testPool is the size of each of a test's two pools: the DB's and the
// one for setting up and checking (fixture.pool).
const testPool = 2

var schemaSeq atomic.Int64

// fixture is what a test runs against: db, a DB of pgpipe's on a pool of
// its own, and pool, for setting up and checking what db did, in a fresh
// schema of the test server, dropped when the test ends.
type fixture struct {
	db     *sql.DB
	pool   *pgxpool.Pool
	schema string
}

// table creates the table name (id int PRIMARY KEY) in f's schema and
// returns its quoted name and a count of its rows.
func (f fixture) table(t *testing.T, name string) (string, func() int) {
	t.Helper()
	table := pgx.Identifier{f.schema, name}.Sanitize()
	if _, err := f.pool.Exec(t.Context(), `CREATE TABLE `+table+` (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return table, func() (n int) {
		t.Helper()
		if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

func setup(t *testing.T) fixture {
	t.Helper()
	return setupWith(t, "")
}

// setupWith is setup with db's pool in pgx's default_query_exec_mode mode
// ("": pgx's default).
func setupWith(t *testing.T, mode string) fixture {
	t.Helper()
	ctx := t.Context()
	url, admin := pgtest.URL(t), pgtest.AdminPool(t)
	schema := fmt.Sprintf("pgpipe_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	c := pgtest.Charge(t, 2*testPool)
	open := func() *pgxpool.Pool {
		pool, err := pgxpool.New(ctx, c.DSN(pgtest.WithPoolSize(url, testPool)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool
	}
	pool := open()
	if mode != "" {
		url = pgtest.WithParam(url, "default_query_exec_mode", mode)
	}
	dbPool := open()
	db := pgpipe.OpenDB(dbPool)
	t.Cleanup(func() { db.Close() })
	return fixture{db: db, pool: pool, schema: schema}
}

// beginLazy begins conn's transaction with BeginLazy and prelude p.
func beginLazy(conn *sql.Conn, p pgpipe.Prelude) error {
	return conn.Raw(func(dc any) error { return dc.(*pgpipe.Conn).BeginLazy(p) })
}

// begun returns a connection of f.db with a transaction begun (lazily:
// nothing sent yet), returned to the pool at the end of the test, or when
// the test closes it (the pool is small: testPool).
func begun(t *testing.T, f fixture) *sql.Conn {
	t.Helper()
	conn, err := f.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := beginLazy(conn, nil); err != nil {
		t.Fatal(err)
	}
	return conn
}

// scanAll reads rows into the values database/sql hands out (Scan into
// *any), after the columns' database type names, so that two ways of
// running one query can be compared exactly.
func scanAll(t *testing.T, rows *sql.Rows) [][]any {
	t.Helper()
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	var names []any
	for _, ct := range types {
		names = append(names, ct.DatabaseTypeName())
	}
	out := [][]any{names}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The first statement of a lazily begun transaction travels in a pipeline
// with its BEGIN, and its rows are converted by pgpipe, not by pgx's
// database/sql adapter: every type must come out as the adapter gives it.
func TestFirstStatementOfATransactionReturnsWhatPgxsAdapterReturns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	enum := pgx.Identifier{f.schema, "mood"}.Sanitize()
	if _, err := f.pool.Exec(ctx, `CREATE TYPE `+enum+` AS ENUM ('calm', 'busy')`); err != nil {
		t.Fatal(err)
	}
	exprs := []string{
		"true", "false", `'\xdeadbeef'::bytea`, "7::int2", "-8::int4", "9000000000::int8",
		"1.5::float4", "2.25::float8", "12345.678900::numeric", "'NaN'::numeric", "'text'::text",
		"'vc'::varchar(5)", "'c'::char(3)", "'name'::name", "'9b2f6c1e-0000-4000-8000-000000000001'::uuid",
		`'{"a": [1, 2]}'::json`, `'{"a": [1, 2]}'::jsonb`, "'2026-11-29'::date", "'infinity'::date",
		"'2026-11-29 22:40:01.123456'::timestamp", "'2026-11-29 22:40:01.123456+02'::timestamptz",
		"'1 day 02:03:04'::interval", "'{1,2,3}'::int4[]", `'{"a b",c}'::text[]`, "'10.0.0.1/8'::inet",
		"42::oid", "'(1,2)'::point", "'<a/>'::xml", "'busy'::" + enum, "12.5::money", "NULL::int4",
		"NULL::text", "'é ✓'::text",
	}
	for _, e := range exprs {
		t.Run(e, func(t *testing.T) {
			q := "SELECT " + e + " AS v, $1::int4 AS n"
			want := func() [][]any {
				rows, err := f.db.QueryContext(ctx, q, 1)
				if err != nil {
					t.Fatal(err)
				}
				return scanAll(t, rows)
			}()
			conn := begun(t, f)
			rows, err := conn.QueryContext(ctx, q, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := scanAll(t, rows)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("first statement of a transaction: %#v\n  pgx's adapter: %#v", got, want)
			}
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// txStatus reads the server's view of conn's transaction: 'I' idle, 'T' in
// a transaction, 'E' in a failed one.
func txStatus(t *testing.T, conn *sql.Conn) byte {
	t.Helper()
	var st byte
	err := conn.Raw(func(dc any) error {
		st = dc.(*pgpipe.Conn).Conn.Conn().PgConn().TxStatus()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestLazyBeginIsATransaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := t.Context()
	table, count := f.table(t, "lazy")

	t.Run("nothing is sent until the first statement, which begins it", func(t *testing.T) {
		conn := begun(t, f)
		if st := txStatus(t, conn); st != 'I' {
			t.Fatalf("after Begin: status %c, want I (no BEGIN sent yet)", st)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (1)`); err != nil {
			t.Fatal(err)
		}
		if st := txStatus(t, conn); st != 'T' {
			t.Fatalf("after the first statement: status %c, want T", st)
		}
		if n := count(); n != 0 {
			t.Fatalf("another connection sees %d rows before the commit, want 0", n)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 0 {
			t.Fatalf("%d rows after ROLLBACK, want 0", n)
		}
	})

	t.Run("the first statement may be a query; COMMIT keeps its writes", func(t *testing.T) {
		conn := begun(t, f)
		var id int
		if err := conn.QueryRowContext(ctx, `INSERT INTO `+table+` VALUES (2) RETURNING id`).Scan(&id); err != nil || id != 2 {
			t.Fatalf("INSERT … RETURNING: %d, %v", id, err)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (3)`); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 2 {
			t.Fatalf("%d rows after COMMIT, want 2", n)
		}
	})

	t.Run("a failing first statement leaves the transaction failed, not committed", func(t *testing.T) {
		conn := begun(t, f)
		_, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (2)`) // taken
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("duplicate insert: %v, want unique_violation", err)
		}
		if st := txStatus(t, conn); st != 'E' {
			t.Fatalf("status %c, want E (a failed transaction)", st)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (4)`); err == nil {
			t.Fatal("a statement after the failure ran; want it refused in the failed transaction")
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 2 {
			t.Fatalf("%d rows, want 2", n)
		}
	})

	t.Run("a failing first query reports its error from Query, as pgx's adapter does", func(t *testing.T) {
		q := `INSERT INTO ` + table + ` VALUES (2) RETURNING id` // taken
		_, want := f.db.QueryContext(ctx, q)
		conn := begun(t, f)
		rows, err := conn.QueryContext(ctx, q)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" || want == nil || err.Error() != want.Error() {
			t.Fatalf("Query: rows %v, error %v; pgx's adapter: %v", rows != nil, err, want)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a first query of many rows reads them all", func(t *testing.T) {
		conn := begun(t, f)
		rows, err := conn.QueryContext(ctx, `SELECT g FROM generate_series(1, 1000) g`)
		if err != nil {
			t.Fatal(err)
		}
		got := scanAll(t, rows)
		if len(got) != 1001 || got[1][0] != int64(1) || got[1000][0] != int64(1000) {
			t.Fatalf("%d rows (with the type names), first %v, last %v", len(got), got[1], got[len(got)-1])
		}
		conn.ExecContext(ctx, "ROLLBACK")
		conn = begun(t, f)
		empty, err := conn.QueryContext(ctx, `SELECT 1 WHERE false`)
		if err != nil {
			t.Fatal(err)
		}
		if got := scanAll(t, empty); len(got) != 1 {
			t.Fatalf("no rows: got %v", got[1:])
		}
		conn.ExecContext(ctx, "ROLLBACK")
	})

	t.Run("a transaction ended before any statement sends nothing", func(t *testing.T) {
		for _, end := range []string{"COMMIT", "ROLLBACK", " rollback ;"} {
			conn := begun(t, f)
			if _, err := conn.ExecContext(ctx, end); err != nil {
				t.Fatalf("%q: %v", end, err)
			}
			// The next statement runs outside any transaction: autocommit.
			if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES (10)`); err != nil {
				t.Fatal(err)
			}
			if st := txStatus(t, conn); st != 'I' {
				t.Fatalf("%q then a statement: status %c, want I (autocommit)", end, st)
			}
			if _, err := conn.ExecContext(ctx, `DELETE FROM `+table+` WHERE id = 10`); err != nil {
				t.Fatal(err)
			}
			conn.Close() // back to the pool (of testPool connections)
		}
	})

	t.Run("a connection returned with its BEGIN unsent is not in a transaction when reused", func(t *testing.T) {
		conn, err := f.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := beginLazy(conn, nil); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		// Whichever connection the pool hands out next runs autocommit.
		for range 3 {
			if _, err := f.db.ExecContext(ctx, `INSERT INTO `+table+` VALUES (11) ON CONFLICT DO NOTHING`); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(); n != 3 {
			t.Fatalf("%d rows, want 3: a statement ran in a transaction that never committed", n)
		}
	})

	t.Run("Begin twice is an error", func(t *testing.T) {
		conn := begun(t, f)
		if err := beginLazy(conn, nil); err == nil {
			t.Fatal("second Begin: nil error")
		}
		if _, err := conn.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		if err := beginLazy(conn, nil); err == nil {
			t.Fatal("Begin inside a begun transaction: nil error")
		}
		conn.ExecContext(ctx, "ROLLBACK")
	})

	t.Run("a cancelled first statement reports the cancellation", func(t *testing.T) {
		conn := begun(t, f)
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := conn.ExecContext(cctx, "SELECT pg_sleep(5)")
		if err == nil {
			t.Fatal("pg_sleep(5) under a 50 ms deadline: nil error")
		}
	})
}
