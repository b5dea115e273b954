package app

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/connlimit"
)

// Config configures the demo. The zero value is not usable: start from
// DefaultConfig (or the flags, see Main).
type Config struct {
	// Addr is the address Run listens on; port 0 picks a free port.
	Addr string
	// DataDir holds oke's file driver and the SQLite business data.
	DataDir string
	// Postgres, when set, is a DSN (a postgres:// URL or key=value string):
	// oke's tables (the Postgres driver, schema "oke", migrated at start) and
	// the business tables (in the DSN's current schema, public unless its
	// search_path says otherwise) live in that database instead of DataDir.
	// Several instances may share it. Driver is then ignored.
	Postgres string
	// Lease is the in-progress lease of an Idempotency-Key (oke.Config.Lease).
	Lease time.Duration
	// Driver is the idempotency store: "file" (in DataDir; the default) or
	// "memory" (nothing survives the process; for load tests).
	Driver string
	// ShutdownTimeout bounds a graceful shutdown.
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers
	// (http.Server.ReadHeaderTimeout): a client that sends them slowly is
	// cut off.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body, from
	// its first byte (http.Server.ReadTimeout): a stalled or trickled body
	// is cut off (the request gets 400 and the connection is closed). It
	// does not bound how long a flow runs: net/http lifts the read deadline
	// once the body is read.
	ReadTimeout time.Duration
	// WriteTimeout bounds an ordinary request from the end of its headers
	// to the end of its answer (http.Server.WriteTimeout). A request that
	// runs longer (POST /slow with a long ms) loses its live answer: the
	// connection is closed, and a retry with the same Idempotency-Key gets
	// the stored one. Streams (POST /export) and the live feed (GET
	// /events) are exempt — oke moves the deadline along with each write,
	// so only a client that stops reading for WriteTimeout is cut off.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request (http.Server.IdleTimeout).
	IdleTimeout time.Duration
	// MaxConns caps the connections the server holds open at once
	// (internal/connlimit on the listener Server.Listener wraps). At the
	// cap a new connection takes the place of the longest-idle keep-alive
	// one (else of the oldest that has sent nothing yet); only when every
	// connection is running a request is the new one closed at once. Open
	// lowers it, with a warning, to fit the process's open-file limit:
	// FDHeadroom less, or half of it when that is more.
	MaxConns int
	// MaxHeaderBytes bounds a request's headers (http.Server.MaxHeaderBytes;
	// a larger request gets 431).
	MaxHeaderBytes int
	// Provider is the URL of the refund provider payments.refund calls (POST,
	// JSON, deduped on its Idempotency-Key header). Empty means the demo's own
	// fake provider, called in-process (it is also served at
	// /_provider/refunds).
	Provider string
	// PollInterval is how often oke's scheduler looks for due journal runs
	// (oke.Config.PollInterval): runs whose process died, woken sleeps.
	PollInterval time.Duration
	// RetryDelay is how long a run whose step result could not be saved
	// waits before it is picked up again (oke.Config.RetryDelay).
	RetryDelay time.Duration
	// ClaimFirst makes every flow claim its Idempotency-Key before it runs
	// (oke.Config.ClaimFirst), where oke would otherwise hold the claim of
	// payments.charge in the charge's transaction on Postgres: for
	// comparing the two.
	ClaimFirst bool
	// Clock, when set, is the time the demo's durable runs count in
	// (oke.Config.Clock) and, with Driver "memory", the driver's: tests make
	// a reminder's day pass at once with oketest.Clock. It is no flag.
	Clock func() time.Time
	// Unprotected also binds bench.chargeUnprotected at POST
	// /bench/unprotected-charges: payments.charge's handler with
	// Idempotency-Key handling off. It exists only to measure what
	// idempotency costs, side by side (scripts/loadbench); never use it to
	// take real payments.
	Unprotected bool
	// Logger receives the app's logs; nil means a text logger on Run's
	// stderr (or slog.Default() for Open).
	Logger *slog.Logger
	// SweepCron is the schedule of demo.sweep, the nightly sweep (a cron
	// spec, oke.Cron; UTC); "off" binds no schedule.
	SweepCron string
	// SweepInterval and SweepRate are oke.Config's: how often the app's
	// background sweep of expired Idempotency-Key rows runs, and its pace
	// (zero: oke's defaults).
	SweepInterval time.Duration
	SweepRate     int
	// AdminToken guards the admin API and console under /_oke/ (oke.
	// AdminToken): requests need "Authorization: Bearer <token>" or the
	// console's session cookie. Empty (and no AdminTokenFile) means a
	// random token drawn at Open and written to TokenFileName in DataDir,
	// readable by its owner only (Run logs the file's path, never the
	// token); see Server.AdminToken.
	AdminToken string
	// AdminTokenFile, when set, names a file that holds the admin token
	// (one line; a trailing newline is dropped): it takes precedence over
	// AdminToken. Unlike a token on the command line, it does not show in
	// ps. Open fails, naming -admin-token-file, when the file is missing,
	// empty or holds more than one line, and warns when every user may
	// read it.
	AdminTokenFile string
}

// DefaultConfig is the configuration of the flags' defaults.
func DefaultConfig() Config {
	return Config{
		Addr:            "127.0.0.1:8080",
		DataDir:         ".oke",
		Lease:           30 * time.Second,
		Driver:          "file",
		ShutdownTimeout: 10 * time.Second,
		PollInterval:    250 * time.Millisecond,
		RetryDelay:      5 * time.Minute,
		SweepCron:       DefaultSweepCron,

		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          DefaultMaxConns,
	}
}

// The defaults of -idle-timeout and -max-conns: an idle keep-alive
// connection costs a file descriptor and some memory, so it is kept half a
// minute, and 4096 of them (about 40 MB) at most.
const (
	DefaultIdleTimeout = 30 * time.Second
	DefaultMaxConns    = 4096
)

// FDHeadroom is how many of the process's file descriptors MaxConns leaves
// for everything else: the databases' files and connections, logs.
const FDHeadroom = 256

func (c Config) validate() error {
	if c.Lease <= 0 {
		return fmt.Errorf("-lease must be positive, got %s", c.Lease)
	}
	if c.PollInterval <= 0 {
		return fmt.Errorf("-poll must be positive, got %s", c.PollInterval)
	}
	if c.RetryDelay <= 0 {
		return fmt.Errorf("-retry-delay must be positive, got %s", c.RetryDelay)
	}
	for _, t := range []struct {
		flag string
		d    time.Duration
	}{
		{"-read-header-timeout", c.ReadHeaderTimeout},
		{"-read-timeout", c.ReadTimeout},
		{"-write-timeout", c.WriteTimeout},
		{"-idle-timeout", c.IdleTimeout},
	} {
		if t.d <= 0 {
			return fmt.Errorf("%s must be positive, got %s (connections need a bound)", t.flag, t.d)
		}
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("-max-conns must be at least 1, got %d", c.MaxConns)
	}
	if c.MaxHeaderBytes < 4<<10 {
		return fmt.Errorf("-max-header-bytes must be at least 4096, got %d", c.MaxHeaderBytes)
	}
	if c.Provider != "" {
		u, err := url.Parse(c.Provider)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-provider must be an http(s) URL, got %q", c.Provider)
		}
	}
	switch c.Driver {
	case "file", "memory":
	default:
		return fmt.Errorf(`-driver must be "file" or "memory", got %q`, c.Driver)
	}
	if c.DataDir == "" && c.Postgres == "" {
		return errors.New("-data must name a folder")
	}
	return nil
}

// Server is the demo app: an oke app with the payments flows, its
// idempotency driver and its business database (SQLite, or Postgres with
// -postgres). It is an http.Handler.
type Server struct {
	app     *oke.App
	db      *sql.DB // writes (SQLite: one connection)
	rdb     *sql.DB // reads (SQLite: read-only connections; Postgres: db itself)
	dialect dialect // the statements that differ between SQLite and Postgres
	drv     driver.Driver
	cfg     Config
	log     *slog.Logger

	providerURL string // where payments.refund calls the provider
	adminToken  string // the admin token (cfg.AdminToken, or drawn at Open)
	tokenFile   string // where the token drawn at Open was written ("" if given): Run logs it
	conns       *connlimit.Limiter
	capLogged   atomic.Int64 // when atConnCap last logged (Unix ns)

	quit      chan struct{} // closed when the server begins shutting down
	quitOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// Open opens the idempotency driver and the business database (in
// cfg.DataDir, or the Postgres database cfg.Postgres names, creating the
// tables it lacks), binds the routes and checks the flows (oke's
// App.Start). Close releases it all.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, quit: make(chan struct{}), providerURL: providerURL(cfg)}
	var err error
	if s.adminToken, err = givenAdminToken(cfg, log); err != nil {
		return nil, err
	}
	s.conns = connlimit.New(connCap(cfg.MaxConns, log))
	s.conns.AtCap = s.atConnCap
	drv, err := openDriver(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.drv = drv
	if s.db, s.rdb, s.dialect, err = openDB(ctx, cfg, log); err != nil {
		drv.Close()
		return nil, err
	}
	if s.adminToken == "" {
		// Drawn only now that the data folder is ours (the file driver
		// locks it): a second demo refused on it does not overwrite the
		// first's token file.
		s.adminToken = rand.Text()
		if s.tokenFile, err = writeTokenFile(cfg.DataDir, s.adminToken); err != nil {
			s.closeDB()
			drv.Close()
			return nil, err
		}
	}
	okeCfg := oke.Config{Driver: drv, Gate: Gate, Lease: cfg.Lease, Logger: log, DB: s.db,
		HTTPClient: httpClient(s.provider()), PollInterval: cfg.PollInterval, RetryDelay: cfg.RetryDelay,
		SweepInterval: cfg.SweepInterval, SweepRate: cfg.SweepRate,
		ClaimFirst: cfg.ClaimFirst, Clock: cfg.Clock}
	if s.dialect == sqliteDialect {
		// A full disk or a locked file is 503, not 500 (on Postgres the
		// driver tells its own database's errors apart).
		okeCfg.Unavailable = sqliteUnavailable
	}
	s.app = oke.New(okeCfg)
	s.routes()
	if err := s.app.Start(ctx); err != nil {
		s.closeDB()
		drv.Close()
		return nil, err
	}
	return s, nil
}

// atConnCap logs, at most once a minute, that connections arrive at the
// cap (-max-conns), with the counts so far.
func (s *Server) atConnCap(bool) {
	now := time.Now().UnixNano()
	last := s.capLogged.Load()
	if now-last < int64(time.Minute) || !s.capLogged.CompareAndSwap(last, now) {
		return
	}
	st := s.conns.Stats()
	s.log.Warn("payments: at the connection cap (-max-conns): idle connections are closed to let new ones in, and new ones refused while all are busy",
		"max_conns", s.conns.Max(), "open", st.Open, "idle", st.Idle, "evicted_total", st.Evicted, "refused_total", st.Refused)
}

// connCap is the connection cap: want, or less when the process's open-file
// limit leaves no room for want connections and FDHeadroom other files.
func connCap(want int, log *slog.Logger) int {
	limit, ok := connlimit.FDLimit()
	if !ok || want <= limit-FDHeadroom {
		return want
	}
	lowered := max(limit-FDHeadroom, limit/2, 1)
	log.Warn("payments: -max-conns lowered to fit the open-file limit (raise it with ulimit -n)",
		"max_conns", want, "open_file_limit", limit, "lowered_to", lowered)
	return lowered
}

// openDriver opens the idempotency store cfg asks for. The Postgres driver
// is migrated at once: the demo owns its database.
func openDriver(ctx context.Context, cfg Config) (driver.Driver, error) {
	if cfg.Postgres != "" {
		d, err := postgres.Open(ctx, cfg.Postgres)
		if err != nil {
			return nil, fmt.Errorf("open the Postgres driver: %w", err)
		}
		if err := d.Migrate(ctx); err != nil {
			d.Close()
			return nil, fmt.Errorf("migrate the Postgres driver: %w", err)
		}
		return d, nil
	}
	if cfg.Driver == "memory" {
		if cfg.Clock != nil {
			return memory.New(memory.WithClock(cfg.Clock)), nil
		}
		return memory.New(), nil
	}
	d, err := file.Open(cfg.DataDir)
	if errors.Is(err, file.ErrLocked) {
		return nil, fmt.Errorf("the data folder %s is locked: %w", cfg.DataDir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open the file driver in %s: %w", cfg.DataDir, err)
	}
	return d, nil
}

// routes binds the demo's routes (DESIGN.md section 6).
func (s *Server) routes() {
	a := s.app
	a.Handle(oke.POST("/charges"), s.chargeFlow())
	if s.cfg.Unprotected {
		a.Handle(oke.POST(UnprotectedChargesPath), s.unprotectedChargeFlow())
	}
	a.Handle(oke.GET("/charges"), s.listFlow())
	a.Handle(oke.POST("/quotes"), s.quoteFlow())
	a.Handle(oke.GET("/charges/{id}"), s.getFlow())
	refund := s.refundFlow()
	a.Handle(oke.POST("/refunds"), refund)
	a.Handle(oke.GET("/refunds/{id}"), s.getRefundFlow())
	a.Handle(oke.POST("/pipeline"), s.pipelineFlow())
	a.Handle(oke.GET("/pipeline/{tag}"), s.pipelineLogFlow())
	a.Handle(oke.POST("/slow"), s.slowFlow())
	a.Handle(oke.POST("/notes"), s.noteFlow())
	a.Handle(oke.POST("/fail"), s.failFlow())
	a.Handle(oke.POST("/reminders"), s.remindFlow())
	a.Handle(oke.GET("/reminders"), s.remindersFlow())
	a.Handle(oke.POST("/export"), s.exportFlow())
	a.Handle(oke.GET("/events"), s.eventsFlow())
	a.Handle(oke.Webhook("/webhooks/provider", "id"), s.webhookFlow())
	a.Handle(oke.GET("/whoami"), s.whoamiFlow())
	if s.cfg.SweepCron != "off" && s.cfg.SweepCron != "" {
		a.Handle(oke.Cron(s.cfg.SweepCron), s.sweepFlow())
	}
	approval := s.refundApprovalFlow(refund)
	a.Handle(oke.Internal(), approval)
	a.Handle(oke.POST("/refund-requests"), s.refundRequestFlow(approval))
	a.Handle(oke.POST("/refund-requests/{id}/approve"), s.approveFlow())
	a.HandleHTTP("GET /metrics", a.MetricsHandler())
	a.HandleHTTP("GET /healthz", http.HandlerFunc(s.healthz))
	// The admin API and console, for `oke runs -addr` and browsers: behind
	// the admin token (they show stored responses and replay runs).
	a.HandleHTTP(AdminPrefix+"/", http.StripPrefix(AdminPrefix, admin.Handler(a, admin.Token(s.adminToken))))
	a.HandleHTTP(ProviderPath, s.provider())
}

// AdminPrefix is where the demo mounts oke's admin.Handler.
const AdminPrefix = "/_oke"

// healthz answers 200 {"status":"ok"} when the database answers.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.rdb.PingContext(ctx); err != nil {
		s.log.Error("payments: health check", "err", err)
		oke.WriteError(w, oke.Fail(http.StatusServiceUnavailable, "Unhealthy", "The database does not answer."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"status":"ok"}`+"\n")
}

// HTTPServer returns the http.Server that serves s, with the connection
// bounds of its Config: ReadHeaderTimeout, ReadTimeout (a stalled body is
// cut off), WriteTimeout (streams and the live feed are exempt: oke keeps
// their deadline moving), IdleTimeout and MaxHeaderBytes; serve it on
// Server.Listener's listener for MaxConns. Shutting it down ends the live
// feeds (Server.Shutdown), so that http.Server.Shutdown does not wait for
// them. Run serves with it; so may a test, through httptest.Server.Config
// (and httptest.Server.Listener = s.Listener(…)).
func (s *Server) HTTPServer() *http.Server {
	srv := &http.Server{
		Addr:              s.cfg.Addr,
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ConnState:         s.conns.ConnState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(s.Shutdown)
	return srv
}

// Listener wraps ln with the connection cap (Config.MaxConns): serve
// HTTPServer's server on it. The cap counts every listener s wrapped,
// together.
func (s *Server) Listener(ln net.Listener) net.Listener { return s.conns.Listener(ln) }

// Conns returns how many connections the server holds open (of those
// accepted through Listener), and the cap.
func (s *Server) Conns() (open, max int) { return s.conns.Stats().Open, s.conns.Max() }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.app.ServeHTTP(w, r) }

// AdminToken is the token the admin API and console under /_oke/ accept:
// Config.AdminTokenFile's, Config.AdminToken, or the one drawn at Open.
func (s *Server) AdminToken() string { return s.adminToken }

// App returns the oke app.
func (s *Server) App() *oke.App { return s.app }

// DB returns the business database (its pool for writes; it reads too).
func (s *Server) DB() *sql.DB { return s.db }

// Shutdown ends the live /events feeds, so that http.Server.Shutdown does
// not wait for them. Register it with http.Server.RegisterOnShutdown.
func (s *Server) Shutdown() {
	s.quitOnce.Do(func() { close(s.quit) })
	s.app.Shutdown()
}

// Close ends the live feeds, waits (up to ctx) for flows still running,
// then closes the driver and the database. Shut the http.Server down first.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.Shutdown()
		var errs []error
		if err := s.app.Close(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := s.drv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close idempotency driver: %w", err))
		}
		if err := s.closeDB(); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// closeDB closes the business database's pools.
func (s *Server) closeDB() error {
	var errs []error
	if s.rdb != s.db {
		if err := s.rdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close database: %w", err))
		}
	}
	if err := s.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close database: %w", err))
	}
	return errors.Join(errs...)
}
