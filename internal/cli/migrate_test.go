package cli_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMigrateWithoutADatabaseSaysHow(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	code, _, stderr := run("migrate")
	if code != 2 || !strings.Contains(stderr, "pass -postgres DSN") {
		t.Fatalf("exit %d, stderr %q; want 2 and how to name the database", code, stderr)
	}
	code, _, stderr = run("migrate", "-postgres", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=5")
	if code != 1 || !strings.Contains(stderr, "oke migrate: postgres: open") {
		t.Fatalf("unreachable server: exit %d, stderr %q; want 1 and the open error", code, stderr)
	}
}

// TestMigrateTwice runs oke migrate against the test server (the one
// scripts/pg provides): the first run creates the tables, the second finds
// nothing to do.
func TestMigrateTwice(t *testing.T) {
	url := os.Getenv("OKE_TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	schema := fmt.Sprintf("oke_cli_%d", os.Getpid())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	code, stdout, stderr := run("migrate", "-postgres", url, "-schema", schema)
	if code != 0 || !strings.Contains(stdout, "applied 4 migration(s) to schema "+schema+": 001_init.sql, 002_finished_runs.sql, 003_next_attempts.sql, 004_claim_function.sql") {
		t.Fatalf("first migrate: exit %d\nstdout: %s\nstderr: %s\n(the test needs the Postgres server of scripts/pg or OKE_TEST_DATABASE_URL)", code, stdout, stderr)
	}
	code, stdout, stderr = run("migrate", "-postgres", url, "-schema", schema)
	if code != 0 || !strings.Contains(stdout, "schema "+schema+" is up to date") {
		t.Fatalf("second migrate: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
