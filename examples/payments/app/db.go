package app

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite" // registers the "sqlite" database/sql driver (pure Go)
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/okengine/oke/driver/postgres"
)

// sqliteUnavailable reports whether err from the SQLite business database
// means it could not be written or read just now — the disk is full or
// failing, the file is read-only or locked — rather than a fault of the
// request (oke.Config.Unavailable): the request then gets 503, not 500.
func sqliteUnavailable(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED,
		sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM:
		return true
	}
	return false
}

// DBFile is the name of the SQLite file, in the data folder, that holds the
// demo's business data (charges, notes, ...).
const DBFile = "payments.db"

// Each flavour of the business database has its schema in a file of its
// own; the SQL in the flows is written to run on both (see dialect).
var (
	//go:embed schema_sqlite.sql
	schemaSQLite string
	//go:embed schema_postgres.sql
	schemaPostgres string
)

// dialect says which flavour the business database is. The SQL in the flows
// is written once where it can be: $1-style placeholders (both accept
// them), INSERT … ON CONFLICT … DO UPDATE with the target table's columns
// qualified (Postgres finds a bare name ambiguous next to EXCLUDED),
// RETURNING, and times as RFC 3339 text. A statement that must differ is a
// pair of constants below, and the call site picks one with a branch on the
// dialect, so that every statement the demo sends is a constant string (what
// static analysis, e.g. oke extract, can classify).
type dialect int

const (
	sqliteDialect dialect = iota
	postgresDialect
)

// The statements that differ: they order rows as inserted, which is SQLite's
// rowid and, in Postgres, a seq identity column of the table's own.
const (
	// listChargesSQLite and listChargesPostgres list one tenant's charges,
	// newest first ($1 the tenant, $2 the limit).
	listChargesSQLite = `SELECT id, amount, currency, created_at FROM charges
		WHERE tenant = $1 ORDER BY rowid DESC LIMIT $2`
	listChargesPostgres = `SELECT id, amount, currency, created_at FROM charges
		WHERE tenant = $1 ORDER BY seq DESC LIMIT $2`
	// listProviderRefundsSQLite and listProviderRefundsPostgres list the
	// fake provider's refunds, oldest first.
	listProviderRefundsSQLite = `SELECT id, charge_id, amount, currency, reference, idempotency_key, requests, created_at
		FROM provider_refunds ORDER BY rowid`
	listProviderRefundsPostgres = `SELECT id, charge_id, amount, currency, reference, idempotency_key, requests, created_at
		FROM provider_refunds ORDER BY seq`
)

// openDB opens the business database cfg asks for: Postgres at
// cfg.Postgres, else SQLite in cfg.DataDir. w is the pool for writes, r the
// pool for reads (the same pool on Postgres). What migrating found that
// needs a person is logged on log.
func openDB(ctx context.Context, cfg Config, log *slog.Logger) (w, r *sql.DB, d dialect, err error) {
	if cfg.Postgres != "" {
		db, err := openPostgres(ctx, cfg.Postgres, log)
		return db, db, postgresDialect, err
	}
	w, r, err = openSQLite(ctx, cfg.DataDir, log)
	return w, r, sqliteDialect, err
}

// openPostgres opens a database/sql pool on the DSN (pgx's stdlib driver)
// and creates the schema in the DSN's current schema. The DSN may carry
// pgxpool's settings (pool_max_conns, …), which the driver's pool reads;
// they are dropped here, where pgx would send them to the server as
// unknown run-time parameters.
func openPostgres(ctx context.Context, dsn string, log *slog.Logger) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open the business database: %w", err)
	}
	for k := range cfg.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			delete(cfg.RuntimeParams, k)
		}
	}
	// Give up on a host that accepts and never answers (a frozen primary
	// after a failover), as the oke driver does: database/sql does not
	// cancel a connect its caller stopped waiting for.
	if cfg.ConnectTimeout == 0 && !strings.Contains(dsn, "connect_timeout") {
		cfg.ConnectTimeout = postgres.DefaultConnectTimeout
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := migratePostgres(ctx, db, log); err != nil {
		db.Close()
		return nil, fmt.Errorf("open the business database: %w", err)
	}
	return db, nil
}

// migratePostgres creates the Postgres schema. It is safe to run on every
// start, and from several instances at once: CREATE TABLE IF NOT EXISTS
// alone is not (two racing creators can both pass the check and one fails on
// the catalog's unique index), so the statements run in one transaction
// under an advisory lock on the schema's name.
func migratePostgres(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx,
		`SELECT pg_advisory_xact_lock(hashtext('okengine/oke examples/payments schema ' || current_schema()))`); err != nil {
		return fmt.Errorf("create schema: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, schemaPostgres); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if err := oneRefundPerCharge(ctx, tx, log); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}

// openSQLite opens (creating if needed) the SQLite database in dir, in WAL mode
// with a busy timeout, and creates the schema. It returns two pools on the
// one file: w, one connection, for statements that write, so that writers
// queue in Go rather than spin on SQLite's busy handler (measured: ~45%
// more charges per second and a third of the p99 latency under 32 clients);
// and r, a few read-only connections, which WAL lets read while w writes.
func openSQLite(ctx context.Context, dir string, log *slog.Logger) (w, r *sql.DB, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create data folder: %w", err)
	}
	path := filepath.Join(dir, DBFile)
	dsn := func(readOnly bool) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "foreign_keys(1)")
		if readOnly {
			q.Add("_pragma", "query_only(1)")
		} else {
			q.Set("_txlock", "immediate")
		}
		return "file:" + path + "?" + q.Encode()
	}
	if w, err = sql.Open("sqlite", dsn(false)); err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	if err := migrateSQLite(ctx, w, log); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	if r, err = sql.Open("sqlite", dsn(true)); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	return w, r, nil
}

// migrateSQLite creates the SQLite schema. It is safe to run on every start.
func migrateSQLite(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schemaSQLite); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	// refunds.provider_id arrived with payments.refund.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('refunds') WHERE name = 'provider_id'`).Scan(&n); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if n == 0 {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE refunds ADD COLUMN provider_id TEXT NOT NULL DEFAULT ''`); err != nil {
			return fmt.Errorf("create schema: add refunds.provider_id: %w", err)
		}
	}
	if err := oneRefundPerCharge(ctx, tx, log); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}

// The statements of oneRefundPerCharge, the same on SQLite and Postgres.
const (
	countChargesRefundedTwice = `SELECT count(*) FROM
		(SELECT charge_id FROM refunds GROUP BY charge_id HAVING count(*) > 1) AS twice`
	createRefundsOnePerCharge = `CREATE UNIQUE INDEX IF NOT EXISTS refunds_one_per_charge ON refunds (charge_id)`
	createRefundsByCharge     = `CREATE INDEX IF NOT EXISTS refunds_by_charge ON refunds (charge_id)`
)

// oneRefundPerCharge lets the database refuse a second refund of a charge:
// the unique index refunds_one_per_charge on refunds.charge_id. (payments.refund
// itself refuses it first, with its claim of "refund:<chargeId>"; the index
// is the backstop.) Versions of the demo before that rule could refund a
// charge several times, and their data cannot take the index: then it
// makes a plain index for the refund lookup instead, and logs which fix
// needs a person. Safe to run on every start.
func oneRefundPerCharge(ctx context.Context, tx *sql.Tx, log *slog.Logger) error {
	var twice int
	if err := tx.QueryRowContext(ctx, countChargesRefundedTwice).Scan(&twice); err != nil {
		return fmt.Errorf("count charges refunded more than once: %w", err)
	}
	if twice == 0 {
		if _, err := tx.ExecContext(ctx, createRefundsOnePerCharge); err != nil {
			return fmt.Errorf("add the unique index refunds_one_per_charge: %w", err)
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, createRefundsByCharge); err != nil {
		return fmt.Errorf("add the index refunds_by_charge: %w", err)
	}
	log.Warn("payments: charges refunded more than once by an older version of the demo; "+
		"new refunds of them are refused (409 AlreadyRefunded), but the database cannot enforce one refund per charge "+
		"(unique index refunds_one_per_charge) until each of them keeps one refund row",
		"charges", twice)
	return nil
}
