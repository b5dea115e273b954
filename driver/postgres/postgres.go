package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke/driver"
)

// DefaultSchema is the schema the driver's tables live in unless WithSchema
// says otherwise.
const DefaultSchema = "oke"

// DefaultMaxConns is the size of the pool Open creates unless the DSN sets
// pool_max_conns.
const DefaultMaxConns = 16

// DefaultConnectTimeout bounds each attempt to connect to one host (pgx's
// ConnectTimeout, libpq's connect_timeout) unless the DSN sets
// connect_timeout. Without a bound, a connection to a server that accepts
// TCP and never answers — a frozen host, a primary partitioned away after a
// failover — waits for it: the wake-up listener forever, the pool's
// connections for pgxpool's fallback of two minutes, each holding a pool
// slot meanwhile (the pool does not cancel a connect when the caller gives
// up), before they try the next host of a multi-host DSN, the new primary.
const DefaultConnectTimeout = 5 * time.Second

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
	lockScope []byte        // what the schema's advisory lock keys hash ahead of a key (heldclaim.go)

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
// otherwise, and gives up on a host after DefaultConnectTimeout unless it
// sets connect_timeout) and checks that it answers. A DSN may name several
// hosts (postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write):
// every connection — the pool's, the wake-up listener's — goes to the first
// that accepts writes, so after a failover the driver reaches the new
// primary by itself (docs/production.md). It does not create tables:
// call Migrate for that. An unreachable server is driver.ErrUnavailable.
func Open(ctx context.Context, dsn string, opts ...Option) (*Driver, error) {
	c := config{schema: DefaultSchema}
	for _, o := range opts {
		o(&c)
	}
	if c.schema == "" {
		return nil, errors.New("postgres: open: empty schema name")
	}
	d := &Driver{schema: c.schema, quoted: pgx.Identifier{c.schema}.Sanitize(), channel: channelName(c.schema), lockScope: lockScope(c.schema), pool: c.pool, retention: c.retention}
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
		if cfg.ConnConfig.ConnectTimeout == 0 && !strings.Contains(dsn, "connect_timeout") {
			cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
		}
		boundCleanup(cfg) // dial.go
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
