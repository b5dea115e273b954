package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/drivertest"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

var schemaSeq atomic.Int64

// testPool is the size (pool_max_conns) of the pools of the tests'
// drivers: the test server is shared with the other packages' tests and
// other clients, and every test's connections come out of internal/pgtest's
// budget. A driver holds pgtest.DriverConns(testPool) connections at most.
const testPool = 2

// server returns the test server's URL (internal/pgtest: a real server,
// never skipped) and pgtest's admin connection on it, or fails the test.
func server(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	return pgtest.URL(t), pgtest.AdminPool(t)
}

// newDriver opens a driver on a fresh, migrated schema of its own and drops
// the schema when the test ends (after the suite's Close).
func newDriver(t testing.TB) *postgres.Driver {
	t.Helper()
	url, _ := server(t)
	return newDriverIn(t, url, fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1)))
}

// newDriverIn opens a driver on dsn in schema, migrated, and drops the
// schema when the test ends, after closing the driver.
func newDriverIn(t testing.TB, dsn, schema string) *postgres.Driver {
	t.Helper()
	dropSchemaAtEnd(t, schema)
	d := openDriver(t, dsn, testPool, postgres.WithSchema(schema))
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return d
}

// openDriver opens a driver on dsn with pools of pool connections, charged
// to the test's share of the budget, and closes it when the test ends (it
// may be closed before).
func openDriver(t testing.TB, dsn string, pool int, opts ...postgres.Option) *postgres.Driver {
	t.Helper()
	c := pgtest.Charge(t, pgtest.DriverConns(pool))
	d, err := postgres.Open(t.Context(), c.DSN(pgtest.WithPoolSize(dsn, pool)), opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// dropSchemaAtEnd drops schema, with everything in it, when the test ends.
func dropSchemaAtEnd(t testing.TB, schema string) {
	t.Helper()
	_, admin := server(t)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(st *testing.T) driver.Driver {
		if st == t {
			return newProbe(t)
		}
		return newDriver(st)
	})
}

// TestTxConformance runs the rules of the flow's transaction and of the
// claim sent with it (driver.TxDriver, driver.TxClaimer); the flows'
// writes go to a table of the driver's schema.
func TestTxConformance(t *testing.T) {
	drivertest.RunTx(t, func(st *testing.T) driver.Driver {
		if st == t {
			return newProbe(t)
		}
		return newDriver(st)
	}, drivertest.TxOptions{Setup: func(ctx context.Context, d driver.Driver, conn *sql.Conn) (drivertest.Writes, error) {
		table := pgx.Identifier{d.(*postgres.Driver).Schema(), "drivertest_writes"}.Sanitize()
		_, err := conn.ExecContext(ctx, `CREATE TABLE `+table+` (id bigserial PRIMARY KEY, note text NOT NULL)`)
		return drivertest.Writes{
			Insert: `INSERT INTO ` + table + ` (note) VALUES ($1)`,
			Count:  `SELECT count(*) FROM ` + table + ` WHERE note = $1`,
		}, err
	}})
}

// probe is the driver drivertest.Run opens first, on the parent test, to
// see what it implements, and closes at once: closing it gives its
// connections back, so that the parent holds no share of the budget while
// its subtests take theirs.
type probe struct {
	*postgres.Driver
	conns *pgtest.Conns
}

func newProbe(t *testing.T) probe {
	t.Helper()
	url, _ := server(t)
	c := pgtest.Charge(t, pgtest.DriverConns(1))
	d, err := postgres.Open(t.Context(), c.DSN(pgtest.WithPoolSize(url, 1)))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return probe{d, c}
}

func (p probe) Close() error {
	err := p.Driver.Close()
	p.conns.Done()
	return err
}

func TestMigrateIsSafeTwiceAndConcurrently(t *testing.T) {
	url, admin := server(t)
	schema := fmt.Sprintf("oke_test_%d_migrate", os.Getpid())
	dropSchemaAtEnd(t, schema)
	const n = 8
	// n drivers at once, and one more, each of one connection: Migrate
	// needs no more, and none of them uses DB or WatchDue.
	pgtest.Need(t, n+1)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		c := pgtest.Charge(t, 1)
		wg.Go(func() {
			d, err := postgres.Open(t.Context(), c.DSN(pgtest.WithPoolSize(url, 1)), postgres.WithSchema(schema))
			if err != nil {
				errs[i] = err
				return
			}
			defer d.Close()
			errs[i] = d.Migrate(t.Context())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Migrate %d: %v", i, err)
		}
	}
	d, err := postgres.Open(t.Context(), pgtest.Charge(t, 1).DSN(pgtest.WithPoolSize(url, 1)), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	var applied int
	err = admin.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+".oke_migrations").Scan(&applied)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(entries); applied != want { // one per file
		t.Errorf("oke_migrations lists %d migrations, want %d (each applied once)", applied, want)
	}
	// A schema a newer oke migrated is refused, and left as it is.
	if _, err := admin.Exec(t.Context(), "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+
		".oke_migrations (version, name) VALUES (999, '999_future.sql')"); err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(t.Context()); !errors.Is(err, postgres.ErrSchemaNewer) {
		t.Errorf("Migrate of a schema with an unknown migration: err = %v, want ErrSchemaNewer", err)
	}
	// The schema works.
	res, err := d.Claim(t.Context(), driver.ClaimRequest{
		Key:         driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "idem-key-0000-migrate"},
		Fingerprint: "fp", Owner: "o", Lease: time.Minute, TTL: time.Hour,
	})
	if err != nil || !res.Claimed {
		t.Fatalf("Claim on the migrated schema: %+v, %v", res, err)
	}
}

func TestOpenUnreachableServerIsErrUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Open of a closed port: err = %v, want driver.ErrUnavailable", err)
	}
}

func TestClaimUsesTheDatabaseClock(t *testing.T) {
	d := newDriver(t)
	defer d.Close()
	var dbNow time.Time
	if err := d.Pool().QueryRow(t.Context(), "SELECT now()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	res, err := d.Claim(t.Context(), driver.ClaimRequest{
		Key:         driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "idem-key-0000-clock"},
		Fingerprint: "fp", Owner: "o", Lease: 30 * time.Second, TTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Now.Before(dbNow) || res.Now.Sub(dbNow) > 10*time.Second {
		t.Errorf("ClaimResult.Now = %v, want the database's now() just after %v", res.Now, dbNow)
	}
	if got := res.Row.LeaseUntil.Sub(res.Now); got != 30*time.Second {
		t.Errorf("LeaseUntil - Now = %v, want exactly the lease 30s (both from one now())", got)
	}
	if got := res.Row.ExpiresAt.Sub(res.Now); got != time.Hour {
		t.Errorf("ExpiresAt - Now = %v, want exactly the TTL 1h", got)
	}
	if !strings.HasPrefix(d.Schema(), "oke_test_") {
		t.Errorf("Schema() = %q", d.Schema())
	}
}

func TestLostConnectionIsErrUnavailable(t *testing.T) {
	url, admin := server(t)
	schema := fmt.Sprintf("oke_test_%d_lost", os.Getpid())
	dropSchemaAtEnd(t, schema)
	// One connection, never pinged before use (pgxpool pings one idle for a
	// second, and would replace the dead one unseen).
	c := pgtest.Charge(t, 1)
	cfg, err := pgxpool.ParseConfig(c.DSN(pgtest.WithPoolSize(url, 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := postgres.Open(t.Context(), "", postgres.WithPool(pool), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var pid int32
	if err := d.Pool().QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// Wait until the server process is gone (it told the client first).
	var ended bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1, 60000)", pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("pg_terminate_backend(%d, 60s) = %v, %v", pid, ended, err)
	}
	_, err = d.Get(t.Context(), driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "idem-key-0000-lost"})
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Get on a connection the server terminated: err = %v, want driver.ErrUnavailable", err)
	}
	// The pool replaces the connection: the next call works.
	_, err = d.Get(t.Context(), driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "idem-key-0000-lost"})
	if !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get after reconnecting: err = %v, want driver.ErrNotFound", err)
	}
}

// TestWithoutServerTheTestsFailAndSayHow runs this package's conformance
// test in a child process pointed at a closed port: it must fail, not skip,
// and say how to get a server (in CI and out of it).
func TestWithoutServerTheTestsFailAndSayHow(t *testing.T) {
	if os.Getenv("OKE_POSTGRES_CHILD") != "" {
		return // the child runs only TestConformance
	}
	for _, c := range []struct {
		ci   string
		want string
	}{
		{"", "scripts/pg"},
		{"true", "CI: no PostgreSQL answers"},
	} {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestConformance$", "-test.count=1")
		cmd.Env = append(os.Environ(), "OKE_POSTGRES_CHILD=1", "CI="+c.ci,
			"OKE_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("CI=%q, no server: the tests passed, want them to fail:\n%s", c.ci, out)
		}
		if !strings.Contains(string(out), c.want) || strings.Contains(string(out), "SKIP") {
			t.Errorf("CI=%q, no server: output does not say %q (or skips):\n%s", c.ci, c.want, out)
		}
	}
}

// TestConnectTimeoutIsErrUnavailable: a server that takes the TCP
// connection and never answers (a hung one) fails the connect by its
// connect_timeout: unreachable (driver.ErrUnavailable, as TxDriver's
// Unavailable tells the engine), not a plain error a durable step would
// fail for good with.
func TestConnectTimeoutIsErrUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // taken, never answered
		}
	}()
	d := newDriver(t)
	db, err := sql.Open("pgx", "postgres://postgres@"+ln.Addr().String()+"/test?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.PingContext(t.Context())
	if err == nil {
		t.Fatal("a server that never answers was reached")
	}
	if !d.Unavailable(err) {
		t.Fatalf("a connect that timed out: Unavailable(%v) = false, want true", err)
	}
}

// TestMigrateUpgradesASchemaWithoutTraces: a schema an oke before
// migration 015 made and used (migrations 001–014 applied, a completed row
// and a finished run written) upgrades in place: Migrate applies only 015
// (the trace columns) and 016 (the claim function that returns them); the
// old row replays and the old run reads with no trace; new rows and runs
// keep theirs; and the claim function of 004 is still there and answers as
// before, for an older oke still running against the schema during a
// rolling upgrade.
func TestMigrateUpgradesASchemaWithoutTraces(t *testing.T) {
	url, admin := server(t)
	schema := fmt.Sprintf("oke_test_%d_upgrade", os.Getpid())
	dropSchemaAtEnd(t, schema)
	q := pgx.Identifier{schema}.Sanitize()
	ctx := t.Context()

	// The schema as oke before 015 left it.
	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	for _, s := range []string{"CREATE SCHEMA " + q, "SET LOCAL search_path TO " + q,
		"CREATE TABLE " + q + ".oke_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var old []string
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err != nil || v >= 15 {
			continue
		}
		b, err := os.ReadFile("migrations/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, strings.ReplaceAll(string(b), "{s}", q), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+q+".oke_migrations (version, name) VALUES ($1, $2)", v, e.Name()); err != nil {
			t.Fatal(err)
		}
		old = append(old, e.Name())
	}
	// A key the old oke claimed (with its function) and completed, and a
	// run it finished.
	oldKey := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "idem-key-0000-before-015"}
	for _, s := range []string{
		`SELECT count(*) FROM ` + q + `.oke_claim('t', 'p', 'f', 'idem-key-0000-before-015', 'fp', 'o', 60000000, 3600000000, 'run-before-015')`,
		`UPDATE ` + q + `.oke_idempotency SET state = 2, owner = '', lease_until = NULL, completed_at = now(),
			resp_status = 201, resp_content_type = 'application/json', resp_location = '', resp_body = '"old"'`,
		`INSERT INTO ` + q + `.oke_runs (id, flow, input, tenant, principal, status, created_at, updated_at,
			result_status, result_content_type, result_location, result_body)
			VALUES ('run-before-015', 'f', '{}', 't', 'p', 3, now(), now(), 201, 'application/json', '', '"old"')`,
	} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if len(old) != 9 { // 001–004 and 010–014
		t.Fatalf("only %q predate 015", old)
	}

	d := openDriver(t, url, 1, postgres.WithSchema(schema))
	applied, err := d.ApplyMigrations(ctx)
	if err != nil {
		t.Fatalf("Migrate of a schema at 014: %v", err)
	}
	if strings.Join(applied, ",") != "015_trace.sql,016_claim_function_trace.sql,017_failed_runs.sql" {
		t.Fatalf("Migrate applied %q, want 015, 016 and 017 only", applied)
	}

	// What the old oke wrote reads, and replays, with no trace.
	res, err := d.Claim(ctx, driver.ClaimRequest{Key: oldKey, Fingerprint: "fp", Owner: "o2", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Claimed || res.Row.Response == nil || string(res.Row.Response.Body) != `"old"` || res.Row.Response.Trace != "" {
		t.Fatalf("replay of the old row: %+v, %v; want its response, no trace", res, err)
	}
	run, _, err := d.GetRun(ctx, "run-before-015")
	if err != nil || run.Status != driver.RunCompleted || run.Trace != "" {
		t.Fatalf("the old run: %+v, %v; want it completed, no trace", run, err)
	}

	// New rows and runs keep their traces.
	const tr = "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
	newKey := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "idem-key-0000-after-015"}
	if res, err := d.Claim(ctx, driver.ClaimRequest{Key: newKey, Fingerprint: "fp", Owner: "o", Lease: time.Minute, TTL: time.Hour}); err != nil || !res.Claimed {
		t.Fatalf("claim of a new key: %+v, %v", res, err)
	}
	if err := d.Complete(ctx, newKey, "o", driver.Response{Status: 201, Body: []byte(`"new"`), Trace: tr}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if row, err := d.Get(ctx, newKey); err != nil || row.Response == nil || row.Response.Trace != tr {
		t.Fatalf("the new row: %+v, %v; want trace %s", row, err, tr)
	}
	if r, err := d.CreateRun(ctx, driver.Run{ID: "run-after-015", Flow: "f", Tenant: "t", Principal: "p", Trace: tr}, 0); err != nil || r.Trace != tr {
		t.Fatalf("a new run: %+v, %v; want trace %s", r, err, tr)
	}

	// The old claim function still answers as an older oke reads it: its
	// 34 columns, the new key's completed row among them.
	rows, err := d.Pool().Query(ctx, `SELECT * FROM `+q+`.oke_claim('t', 'p', 'f', 'idem-key-0000-after-015', 'fp', 'o3', 60000000, 3600000000, '')`)
	if err != nil {
		t.Fatalf("the old claim function: %v", err)
	}
	defer rows.Close()
	if n := len(rows.FieldDescriptions()); n != 34 {
		t.Errorf("the old claim function returns %d columns, want the 34 it returned before", n)
	}
	if !rows.Next() {
		t.Fatalf("the old claim function returned no row: %v", rows.Err())
	}
	vals, err := rows.Values()
	if err != nil {
		t.Fatal(err)
	}
	if vals[0] != nil || vals[16] != "t" || vals[21] != int16(2) {
		t.Errorf("the old claim function: up %v, seen tenant %v state %v; want no claim, the completed row seen", vals[0], vals[16], vals[21])
	}
}
