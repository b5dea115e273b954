package postgres

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver"
)

// DefaultSchema is the schema the driver's tables live in unless WithSchema
// says otherwise.
const DefaultSchema = "oke"

// DefaultMaxConns is the size of the pool Open creates unless the DSN sets
// pool_max_conns.
const DefaultMaxConns = 16

// Driver is the Postgres driver. It is safe for concurrent use; open it with
// Open and create its tables with Migrate.
type Driver struct {
	pool    *pgxpool.Pool
	ownPool bool // Close closes the pool only when Open created it
	schema  string
	quoted  string // schema as a quoted SQL identifier
	// sqls holds the driver's statements with the schema put in (sql),
	// copied on write: readers take no lock.
	sqls    atomic.Pointer[map[string]string]
	sqlMu   sync.Mutex
	channel string // the schema's LISTEN/NOTIFY channel (notify.go)
	closed  atomic.Bool
	watch   watch // the wake-up listener and its watchers (notify.go)

	retention time.Duration // WithRetention

	dbOnce sync.Once
	db     *sql.DB       // DB's handle on txPool, opened on first use
	txPool *pgxpool.Pool // the pool of flows' transactions
}

var (
	_ driver.Driver  = (*Driver)(nil)
	_ driver.Journal = (*Driver)(nil)
)

// Option configures Open.
type Option func(*config)

type config struct {
	schema    string
	pool      *pgxpool.Pool
	retention time.Duration
}

// WithSchema puts the driver's tables in schema instead of DefaultSchema.
// Several apps (or tests) can share one database with a schema each.
func WithSchema(schema string) Option {
	return func(c *config) { c.schema = schema }
}

// WithPool makes the driver use pool instead of opening its own from the DSN
// (pass "" as the DSN). The driver does not close a pool it was given.
func WithPool(pool *pgxpool.Pool) Option {
	return func(c *config) { c.pool = pool }
}

// Open connects to the database at dsn (a postgres:// URL or a libpq
// key=value string, which may carry pgxpool's settings such as
// pool_max_conns; the pool holds DefaultMaxConns connections unless it says
// otherwise) and checks that it answers. It does not create tables:
// call Migrate for that. An unreachable server is driver.ErrUnavailable.
func Open(ctx context.Context, dsn string, opts ...Option) (*Driver, error) {
	c := config{schema: DefaultSchema}
	for _, o := range opts {
		o(&c)
	}
	if c.schema == "" {
		return nil, errors.New("postgres: open: empty schema name")
	}
	d := &Driver{schema: c.schema, quoted: pgx.Identifier{c.schema}.Sanitize(), channel: channelName(c.schema), pool: c.pool, retention: c.retention}
	if d.pool == nil {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("postgres: open: %w", err)
		}
		if !strings.Contains(dsn, "pool_max_conns") {
			// pgxpool's default (4 on a small machine) is too few once
			// flows hold a connection for their transaction (Fx.Tx).
			cfg.MaxConns = DefaultMaxConns
		}
		d.pool, err = pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, d.wrap("open", err)
		}
		d.ownPool = true
	}
	if err := d.pool.Ping(ctx); err != nil {
		if d.ownPool {
			d.pool.Close()
		}
		return nil, d.wrap("open", err)
	}
	return d, nil
}

// Schema returns the schema the driver's tables live in.
func (d *Driver) Schema() string { return d.schema }

// Pool returns the driver's connection pool, e.g. to run the app's own
// queries on the same connections.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Close stops the wake-up listener (WatchDue) and closes the pool if Open
// created it. Later calls on the driver fail with driver.ErrClosed. Closing
// twice is harmless.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.stopWatch()
	d.dbOnce.Do(func() {}) // no DB from now on
	if d.db != nil {
		d.db.Close()
		if d.txPool != nil {
			d.txPool.Close()
		}
	}
	if d.ownPool {
		d.pool.Close()
	}
	return nil
}

// check fails fast once the driver is closed.
func (d *Driver) check() error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return nil
}

// sql puts the driver's schema into a query: every {s} becomes the quoted
// schema name, so table names are always qualified (no search_path needed,
// which also works through poolers and on a pool given with WithPool).
//
// Each distinct query is expanded once: the driver's statements are a fixed
// set, and the claim alone is 2.5 kB to copy on every request. Readers take
// no lock (the cache is copied on write); past sqlCacheMax entries — which
// only queries built with changing text would reach — a query is expanded
// every time.
func (d *Driver) sql(q string) string {
	if p := d.sqls.Load(); p != nil {
		if x, ok := (*p)[q]; ok {
			return x
		}
	}
	x := strings.ReplaceAll(q, "{s}", d.quoted)
	d.sqlMu.Lock()
	defer d.sqlMu.Unlock()
	var old map[string]string
	if p := d.sqls.Load(); p != nil {
		old = *p
	}
	if len(old) >= sqlCacheMax {
		return x
	}
	next := make(map[string]string, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[q] = x
	d.sqls.Store(&next)
	return x
}

const sqlCacheMax = 512

// errUnique marks a unique violation the caller did not expect to handle.
var errUnique = errors.New("unique violation")

// wrap translates a pgx, database/sql or Postgres error into the driver's
// sentinels. It is the one place that knows those error values:
//
//   - pgx.ErrNoRows, sql.ErrNoRows → driver.ErrNotFound
//   - a closed driver → driver.ErrClosed
//   - a cancelled or timed-out context stays what it is
//   - connection failures (also database/sql's ErrBadConn and ErrConnDone),
//     server shutdown, too many connections, and
//     serialization failures or deadlocks → driver.ErrUnavailable (the
//     operation may or may not have happened; callers fail closed, and may
//     retry when pgconn.SafeToRetry says nothing was sent)
//   - unique violations → errUnique (callers that expect one check first)
//
// Anything else (a bug in a query, a refused value such as invalid UTF-8) is
// returned wrapped as it is.
func (d *Driver) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if d.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, driver.ErrClosed)
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("postgres: %s: %w", op, driver.ErrNotFound)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("postgres: %s: %w: %w", op, errUnique, err)
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03", // shutdown, cannot connect now
			pgErr.Code == "53300",                        // too many connections
			pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return fmt.Errorf("postgres: %s: %w: %w", op, driver.ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	if errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.Timeout(err) ||
		pgconn.SafeToRetry(err) || isConnClosed(err) ||
		errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("postgres: %s: %w: %w", op, driver.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// isConnClosed recognises pgx's errors for a connection or pool that is gone,
// which pgx does not export as values.
func isConnClosed(err error) bool {
	s := err.Error()
	return strings.Contains(s, "conn closed") || strings.Contains(s, "closed pool") ||
		strings.Contains(s, "unexpected EOF") || strings.Contains(s, "connection reset")
}

// --- migrations ---------------------------------------------------------------

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d+)_[a-z0-9_]+\.sql$`)

// migrations returns the embedded migrations in version order, with
// 004_claim_function.sql, which is generated from claimSQL (claimfunc.go). A
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
	out = append(out, migration{version: 4, name: "004_claim_function.sql", sql: claimFunctionSQL()})
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

// --- value helpers ------------------------------------------------------------

// micros is a duration as microseconds, Postgres's precision; queries turn it
// into an interval with `$n * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// nullTime is t, or NULL when t is zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// nullText is s, or NULL when s is empty.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func derefText(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// limitArg is a LIMIT parameter: NULL (no limit) when limit <= 0.
func limitArg(limit int) any {
	if limit <= 0 {
		return nil
	}
	return limit
}
