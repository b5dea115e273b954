package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The migrations are the files in migrations/, embedded. Some are written
// from Go rather than by hand — 004_claim_function.sql from
// claimFunctionSQL (claimfunc.go) — by a test of this package that also
// fails when such a file differs from what it would write
// (TestGeneratedMigrationsAreFresh; it runs without a database). It is a
// test, not a `go run` generator, because the SQL it writes is built by the
// package's unexported code, which only a test of the package can call.
//
//go:generate go test -run ^TestGeneratedMigrationsAreFresh$ -update-migrations .

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d+)_[a-z0-9_]+\.sql$`)

// migrations returns the embedded migrations in version order. A
// migration's {s} stands for the driver's schema.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("two migrations with version %d", out[i].version)
		}
	}
	return out, nil
}

// ErrSchemaNewer: Migrate found a migration applied to the schema that this
// driver does not have; a newer version of oke migrated it. Nothing was
// changed.
var ErrSchemaNewer = errors.New("schema is newer than this driver")

// Migrate creates the schema and its tables, or brings them up to date. It
// applies the embedded migrations (migrations/NNN_name.sql) that the schema's
// oke_migrations table does not list yet, in order, all in one transaction
// that first takes a transaction-level advisory lock on the schema's name: it
// is safe to run twice, and concurrently from several processes (the later
// ones wait, then find nothing to do). A failed migration leaves nothing
// behind. A schema migrated by a newer oke is ErrSchemaNewer.
func (d *Driver) Migrate(ctx context.Context) error {
	_, err := d.ApplyMigrations(ctx)
	return err
}

// ApplyMigrations is Migrate, reporting the names of the migrations it
// applied, in order (none when the schema was up to date).
func (d *Driver) ApplyMigrations(ctx context.Context) ([]string, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	ms, err := migrations()
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, d.wrap("migrate", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	steps := []string{
		`SELECT pg_advisory_xact_lock(hashtextextended('oke.migrate:' || $1, 0))`,
		`CREATE SCHEMA IF NOT EXISTS {s}`,
		`SET LOCAL search_path TO {s}`,
		`CREATE TABLE IF NOT EXISTS {s}.oke_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`,
	}
	for i, q := range steps {
		var args []any
		if i == 0 {
			args = []any{d.schema}
		}
		if _, err := tx.Exec(ctx, d.sql(q), args...); err != nil {
			return nil, d.wrap("migrate", err)
		}
	}
	applied := map[int]bool{}
	rows, err := tx.Query(ctx, d.sql(`SELECT version FROM {s}.oke_migrations`))
	if err != nil {
		return nil, d.wrap("migrate", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, d.wrap("migrate", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, d.wrap("migrate", err)
	}
	known := map[int]bool{}
	for _, m := range ms {
		known[m.version] = true
	}
	for v := range applied {
		if !known[v] {
			return nil, fmt.Errorf("postgres: migrate: schema %s has migration %d, which this driver does not know "+
				"(a newer oke migrated it): %w", d.schema, v, ErrSchemaNewer)
		}
	}
	var done []string
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		// Simple protocol: a migration file may hold several statements.
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{s}", d.quoted), pgx.QueryExecModeSimpleProtocol); err != nil {
			return nil, d.wrap("migrate "+m.name, err)
		}
		if _, err := tx.Exec(ctx, d.sql(`INSERT INTO {s}.oke_migrations (version, name) VALUES ($1, $2)`), m.version, m.name); err != nil {
			return nil, d.wrap("migrate "+m.name, err)
		}
		done = append(done, m.name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, d.wrap("migrate", err)
	}
	return done, nil
}
