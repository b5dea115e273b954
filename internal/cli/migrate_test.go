package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/internal/pgtest"
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

// TestMigrateTwice runs oke migrate against the test server (internal/pgtest:
// a real server, never skipped): the first run creates the tables, the
// second finds nothing to do.
func TestMigrateTwice(t *testing.T) {
	admin := pgtest.Admin(t)
	schema := fmt.Sprintf("oke_cli_%d", os.Getpid())
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA IF EXISTS " + pgx.Identifier{schema}.Sanitize() + " CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	// oke migrate opens the driver on one connection (all Migrate needs),
	// one run after the other.
	dsn := pgtest.Charge(t, 1).DSN(pgtest.WithPoolSize(pgtest.URL(t), 1))
	code, stdout, stderr := run("migrate", "-postgres", dsn, "-schema", schema)
	// Every migration file, in order.
	files, err := filepath.Glob("../../driver/postgres/migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("the migration files: %v, %v", files, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	slices.Sort(names)
	want := fmt.Sprintf("applied %d migrations to schema %s: %s", len(names), schema, strings.Join(names, ", "))
	if code != 0 || !strings.Contains(stdout, want) {
		t.Fatalf("first migrate: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, stderr = run("migrate", "-postgres", dsn, "-schema", schema)
	if code != 0 || !strings.Contains(stdout, "schema "+schema+" is up to date") {
		t.Fatalf("second migrate: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
