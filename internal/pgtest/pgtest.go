// Package pgtest finds the PostgreSQL server oke's tests run against and
// gives each test a database of its own. The tests that need Postgres are
// never skipped: without a server they fail, saying how to get one.
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

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// DefaultURL is the server used when OKE_TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	once     sync.Once
	serverDS string
	admin    *sql.DB
	openErr  error
)

// URL returns the test server's DSN, or fails t.
func URL(t testing.TB) string {
	t.Helper()
	u, _ := server(t)
	return u
}

// Admin returns a pool on the test server for creating and dropping the
// tests' databases and schemas and ending their backends, or fails t. It is
// shared: do not close it.
func Admin(t testing.TB) *sql.DB {
	t.Helper()
	_, db := server(t)
	return db
}

func server(t testing.TB) (string, *sql.DB) {
	t.Helper()
	once.Do(func() {
		serverDS = os.Getenv("OKE_TEST_DATABASE_URL")
		if serverDS == "" {
			serverDS = DefaultURL
		}
		if admin, openErr = sql.Open("pgx", serverDS); openErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		openErr = admin.PingContext(ctx)
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
	return serverDS, admin
}

// NewDatabase creates a database named prefix_<pid>_<random> on the test
// server and returns its name and a DSN for it. It is dropped (WITH
// (FORCE)) when the test ends, after cleanups registered later.
func NewDatabase(t testing.TB, prefix string) (name, dsn string) {
	t.Helper()
	base, admin := server(t)
	b := make([]byte, 6)
	rand.Read(b)
	name = fmt.Sprintf("%s_%d_%s", prefix, os.Getpid(), hex.EncodeToString(b))
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s on %s: %v (the test user needs CREATEDB)", name, base, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	dsn, err := WithDatabase(base, name)
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

// WithParam returns dsn with one more parameter, key=value.
func WithParam(dsn, key, value string) string {
	if isURL(dsn) {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + url.QueryEscape(key) + "=" + url.QueryEscape(value)
	}
	return dsn + " " + key + "=" + value
}

func isURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}
