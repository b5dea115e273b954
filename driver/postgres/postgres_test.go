package postgres_test

import (
	"context"
	"errors"
	"fmt"
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

var (
	serverOnce sync.Once
	serverPool *pgxpool.Pool // creates and drops the tests' schemas
	serverErr  error
	schemaSeq  atomic.Int64
)

// server returns the test server's URL (internal/pgtest: a real server,
// never skipped) and a pgx admin pool on it, or fails the test.
func server(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.URL(t)
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		serverPool, serverErr = pgxpool.New(ctx, url)
	})
	if serverErr != nil {
		t.Fatalf("admin pool on %s: %v", url, serverErr)
	}
	return url, serverPool
}

// newDriver opens a driver on a fresh, migrated schema of its own and drops
// the schema when the test ends (after the suite's Close).
func newDriver(t testing.TB) *postgres.Driver {
	t.Helper()
	url, _ := server(t)
	return newDriverIn(t, url, fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1)))
}

// newDriverIn opens a driver on dsn in schema, migrated, and drops the
// schema when the test ends.
func newDriverIn(t testing.TB, dsn, schema string) *postgres.Driver {
	t.Helper()
	d, err := postgres.Open(t.Context(), dsn, postgres.WithSchema(schema))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	dropSchemaAtEnd(t, schema)
	if err := d.Migrate(t.Context()); err != nil {
		_ = d.Close()
		t.Fatalf("Migrate: %v", err)
	}
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
	drivertest.Run(t, func(t *testing.T) driver.Driver { return newDriver(t) })
}

func TestMigrateIsSafeTwiceAndConcurrently(t *testing.T) {
	url, admin := server(t)
	schema := fmt.Sprintf("oke_test_%d_migrate", os.Getpid())
	dropSchemaAtEnd(t, schema)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			d, err := postgres.Open(t.Context(), url, postgres.WithSchema(schema))
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
	d, err := postgres.Open(t.Context(), url, postgres.WithSchema(schema))
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
	if want := len(entries) + 1; applied != want { // the files and 004_claim_function
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
	d, err := postgres.Open(t.Context(), pgtest.WithParam(url, "pool_max_conns", "1"), postgres.WithSchema(schema))
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
	if _, err := admin.Exec(t.Context(), "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
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
