package app_test

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

// defaultPostgresURL is the server the -postgres tests use when
// OKE_TEST_DATABASE_URL is not set: what scripts/pg starts by default.
const defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	pgOnce  sync.Once
	pgURL   string
	pgAdmin *sql.DB // creates and drops the tests' databases
	pgErr   error
)

// pgServer returns the test server's DSN and an admin pool on it, or fails
// the test: the demo's -postgres mode is tested against a real server, never
// skipped (scripts/test, which CI runs, starts one).
func pgServer(t *testing.T) (string, *sql.DB) {
	t.Helper()
	pgOnce.Do(func() {
		pgURL = os.Getenv("OKE_TEST_DATABASE_URL")
		if pgURL == "" {
			pgURL = defaultPostgresURL
		}
		if pgAdmin, pgErr = sql.Open("pgx", pgURL); pgErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pgErr = pgAdmin.PingContext(ctx)
	})
	if pgErr != nil {
		t.Fatalf("no PostgreSQL answers at %s (%v).\nThe demo's -postgres mode is tested against a real server. "+
			"scripts/test (which CI runs) starts one; by hand, start a throwaway one with\n\teval \"$(scripts/pg)\"\n"+
			"or point OKE_TEST_DATABASE_URL at a server where you may create databases.", pgURL, pgErr)
	}
	return pgURL, pgAdmin
}

// newDatabase creates a database with a random name on the test server and
// returns a DSN for it; the database is dropped when the test ends (after
// the demo's own cleanup, which was registered later). Each test so gets
// oke's schema and the business tables to itself: runs never collide.
func newDatabase(t *testing.T) string {
	t.Helper()
	base, admin := pgServer(t)
	b := make([]byte, 6)
	rand.Read(b)
	name := fmt.Sprintf("oke_demo_test_%d_%s", os.Getpid(), hex.EncodeToString(b))
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s on %s: %v (the test user needs CREATEDB)", name, base, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(t, base, name)
}

// withDatabase returns dsn with its database replaced by name. dsn is a
// postgres:// URL or a key=value string (where a later key wins).
func withDatabase(t *testing.T, dsn, name string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("OKE_TEST_DATABASE_URL: %v", err)
		}
		u.Path = "/" + name
		return u.String()
	}
	return dsn + " dbname=" + name
}

// onPostgres reports whether t runs under TestPostgres: setup then opens
// the demo with -postgres on a fresh database instead of -data.
func onPostgres(t *testing.T) bool { return strings.HasPrefix(t.Name(), "TestPostgres/") }

// The demo's route tests again, with -postgres: the Postgres driver and the
// business tables in one database (a fresh one per demo).
func TestPostgres(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"charges", TestPostCharges},
		{"get charges", TestGetCharges},
		{"slow", TestPostSlow},
		{"notes", TestPostNotes},
		{"fail", TestPostFail},
		{"export", TestPostExport},
		{"events", TestGetEvents},
		{"webhook", TestPostWebhook},
		{"identity", TestIdentity},
		{"metrics", TestGetMetrics},
		{"other routes", TestOtherRoutes},
		{"refunds", TestPostRefunds},
		{"refund cut off", TestRefundCutOffStepCallsTheProviderAgainWithTheSameKey},
		{"pipeline", TestPostPipeline},
		{"reminders", TestPostReminders},
		{"admin", TestAdmin},
	} {
		t.Run(tc.name, tc.test)
	}
}
