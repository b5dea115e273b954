package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke/internal/pgtest"
)

// schemaDriver is a driver on a schema of its own (oke_test_<pid>_name) of
// the test server, with one connection (a statement at a time, and no DB
// or WatchDue), migrated; the schema is dropped when t ends.
func schemaDriver(t *testing.T, name string) *Driver {
	t.Helper()
	url := pgtest.URL(t)
	schema := fmt.Sprintf("oke_test_%d_%s", os.Getpid(), name)
	d, err := Open(t.Context(), pgtest.Charge(t, 1).DSN(pgtest.WithPoolSize(url, 1)), WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		d.Close()
	})
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}
