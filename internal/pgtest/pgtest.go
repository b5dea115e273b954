// Package pgtest finds the PostgreSQL server oke's tests run against,
// gives each test a database of its own, and keeps the tests' connections
// within a budget (see Charge) that leaves room on the server for other
// clients. The tests that need Postgres are never skipped: without a server
// they fail, saying how to get one.
//
// The server is OKE_TEST_DATABASE_URL when set, else DefaultURL — what
// scripts/pg starts, and what scripts/test and .ci/run make sure answers.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib" // and the "pgx" database/sql driver
	"go.uber.org/goleak"
)

// DefaultURL is the server used when OKE_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// AdminApp is the application_name of Admin's connection.
const AdminApp = "oke-pgtest-admin"

var (
	once      sync.Once
	serverDS  string
	serverCfg *pgconn.Config
	admin     *pgxpool.Pool
	adminDB   *sql.DB
	openErr   error
)

// URL returns the test server's DSN, or fails t. Open pools on it with a
// DSN from Charge.
func URL(t testing.TB) string {
	t.Helper()
	server(t)
	return serverDS
}

// Admin returns the process's connection to the test server for creating
// and dropping the tests' databases and schemas and ending their backends,
// as a database/sql pool, or fails t. It is one connection, shared, and
// outside the budget: use it for short statements only, and do not close
// it.
func Admin(t testing.TB) *sql.DB {
	t.Helper()
	server(t)
	return adminDB
}

// AdminPool is Admin as the pgx pool it is.
func AdminPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	server(t)
	return admin
}

// Close closes the process's admin connection, if it was opened: call it
// from TestMain once the tests have run (a package's goroutine-leak check
// would otherwise find its pool's goroutines).
func Close() {
	if adminDB != nil {
		adminDB.Close()
	}
	if admin != nil {
		admin.Close()
	}
}

func server(t testing.TB) {
	t.Helper()
	once.Do(func() {
		serverDS = os.Getenv("OKE_TEST_DATABASE_URL")
		if serverDS == "" {
			serverDS = DefaultURL
		}
		cfg, err := pgxpool.ParseConfig(serverDS)
		if err != nil {
			openErr = err
			return
		}
		serverCfg = cfg.ConnConfig.Config.Copy()
		cfg.MaxConns, cfg.MinConns = 1, 0
		cfg.ConnConfig.RuntimeParams["application_name"] = AdminApp
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if admin, openErr = pgxpool.NewWithConfig(ctx, cfg); openErr != nil {
			return
		}
		if openErr = admin.Ping(ctx); openErr != nil {
			admin.Close()
			return
		}
		adminDB = stdlib.OpenDBFromPool(admin)
	})
	if openErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI: no PostgreSQL answers at %s (%v). .ci/run starts one with scripts/pg before the tests; "+
				"check its output above.", serverDS, openErr)
		}
		t.Fatalf("no PostgreSQL answers at %s (%v).\nThis test runs against a real server. scripts/test starts one; "+
			"by hand, start a throwaway one with\n\teval \"$(scripts/pg)\"\nor point OKE_TEST_DATABASE_URL at a "+
			"server where you may create databases and schemas.", serverDS, openErr)
	}
}

// serverKey names the test server (host and port) in a file name.
func serverKey() string {
	host := strings.NewReplacer("/", "_", ":", "_", "%", "_").Replace(serverCfg.Host)
	return fmt.Sprintf("%s_%d", host, serverCfg.Port)
}

// NewDatabase creates a database named prefix_<pid>_<random> on the test
// server and returns its name and a DSN for it (open pools on it with a DSN
// from Charge). When the test ends, after its other cleanups, it checks
// that the database has no connection left (see Charge), then drops it
// (WITH (FORCE)).
func NewDatabase(t testing.TB, prefix string) (name, dsn string) {
	t.Helper()
	s := shareOf(t)
	b := make([]byte, 6)
	rand.Read(b)
	name = fmt.Sprintf("%s_%d_%s", prefix, os.Getpid(), hex.EncodeToString(b))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s on %s: %v (the test user needs CREATEDB)", name, serverDS, err)
	}
	s.mu.Lock()
	s.dbs = append(s.dbs, name)
	s.mu.Unlock()
	dsn, err := WithDatabase(serverDS, name)
	if err != nil {
		t.Fatalf("OKE_TEST_DATABASE_URL: %v", err)
	}
	return name, dsn
}

// WithDatabase returns dsn with its database replaced by name. dsn is a
// postgres:// URL or a key=value string (where a later key wins).
func WithDatabase(dsn, name string) (string, error) {
	if isURL(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return dsn + " dbname=" + name, nil
}

// WithParam returns dsn with parameter key set to value (replacing the
// value it had, if any).
func WithParam(dsn, key, value string) string {
	if isURL(dsn) {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value // a later key wins
}

func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Main runs a package's tests (for TestMain), then closes the shared admin
// connection and fails the run if any test left a goroutine running (a
// lease ticker, a scheduler, a listener, a pool's goroutines).
func Main(m *testing.M) {
	code := m.Run()
	Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on a successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
