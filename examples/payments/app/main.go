package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/okengine/oke/internal/secretflag"
	"io"
	"log/slog"
	"net"
	"os"
	"time"
)

// RegisterFlags defines the demo's flags on fs, writing into c. The flags
// and their defaults are a public contract (DESIGN.md section 6).
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "addr", c.Addr, "listen on this `address` (port 0 picks a free port)")
	fs.StringVar(&c.DataDir, "data", c.DataDir, "keep oke's file driver and the SQLite business data in this `folder`")
	secretflag.Var(fs, &c.Postgres, "postgres", "use the Postgres driver and business data in this database `DSN` instead of -data (oke's tables in schema oke, the business tables in the DSN's search_path; migrated at start)")
	fs.DurationVar(&c.Lease, "lease", c.Lease, "the `duration` of the in-progress lease of an Idempotency-Key (a retry meanwhile gets 409 with Retry-After)")
	fs.StringVar(&c.Driver, "driver", c.Driver, "the idempotency store `kind`: file (in -data) or memory (lost on exit; for load tests)")
	fs.StringVar(&c.Provider, "provider", c.Provider, "the refund provider's `URL` (default: the demo's own fake provider, called in-process and also served at "+ProviderPath+")")
	fs.DurationVar(&c.PollInterval, "poll", c.PollInterval, "how often (`duration`) the scheduler looks for durable runs to pick up (a dead process's, woken sleeps)")
	fs.DurationVar(&c.RetryDelay, "retry-delay", c.RetryDelay, "how long (`duration`) a durable run whose step could not be saved waits before it runs again")
	fs.BoolVar(&c.ClaimFirst, "claim-first", c.ClaimFirst, "claim every Idempotency-Key before its flow runs (oke.Config.ClaimFirst), never in the flow's transaction: to compare the two")
	fs.BoolVar(&c.Unprotected, "unprotected", c.Unprotected, "benchmarks only: also bind POST "+UnprotectedChargesPath+", the charge handler with Idempotency-Key handling off, to measure its cost side by side")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long (`duration`) a graceful shutdown waits for running requests")
	fs.StringVar(&c.AdminTokenFile, "admin-token-file", c.AdminTokenFile, "read the admin token from this `file` (one line; preferred: unlike -admin-token it does not show in ps); it wins over -admin-token and $OKE_ADMIN_TOKEN")
	secretflag.Var(fs, &c.AdminToken, "admin-token", "the `token` the admin API and console under /_oke/ require (Authorization: Bearer TOKEN, or the console's login); default $OKE_ADMIN_TOKEN, else a random one written to "+TokenFileName+" in -data (its path is logged, never the token)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "how long (`duration`) a client may take to send a request's headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "how long (`duration`) a client may take to send a whole request, headers and body; a stalled body is cut off")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "how long (`duration`) an ordinary request may take, from its headers to the end of its answer (streams and /events are exempt: each of their writes gets this long)")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "how long (`duration`) a keep-alive connection may wait for its next request")
	fs.IntVar(&c.MaxConns, "max-conns", c.MaxConns, "the most `connections` held open at once; at the cap a new one takes the place of the longest-idle keep-alive one, and is closed at once only when all are busy (lowered to fit the open-file limit: 256 less, or half of it)")
	fs.IntVar(&c.MaxHeaderBytes, "max-header-bytes", c.MaxHeaderBytes, "the largest request headers (`bytes`) accepted (431 past it)")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", c.SweepInterval, "how often (`duration`) the background sweep deletes expired Idempotency-Key rows (oke.Config.SweepInterval; 0: every minute; negative: never)")
	fs.IntVar(&c.SweepRate, "sweep-rate", c.SweepRate, "the most expired `rows` a second the background sweep deletes (oke.Config.SweepRate; 0: 10 000; negative: no rate, only the pause after each batch)")
	fs.StringVar(&c.SweepCron, "sweep-cron", c.SweepCron, "the `schedule` of demo.sweep, the nightly sweep of expired Idempotency-Key rows (a cron spec in UTC, e.g. \"0 3 * * *\", @hourly, @every 10m; off: none)")
}

// UsageError is a command-line mistake. The flag package has already shown
// it, with the usage, on stderr.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Main parses args (the flags, without the program name) and runs the demo
// until ctx ends. name is the command shown in the usage text (e.g.
// "payments" or "oke serve"). It returns flag.ErrHelp for -h, a *UsageError
// for bad flags (already reported on stderr), or Run's error.
func Main(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	cfg := DefaultConfig()
	cfg.AdminToken = os.Getenv("OKE_ADMIN_TOKEN")
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: %s [flags]

Runs the oke payments demo: a small payments API that shows every
Idempotency-Key rule and durable execution. Try:

  curl -si localhost:8080/charges -H 'Idempotency-Key: demo-key-0000000001' \
       -d '{"amount":1000,"currency":"usd"}'
  curl -si localhost:8080/pipeline -H 'Idempotency-Key: demo-key-0000000002' \
       -d '{"tag":"p1","steps":5,"stepMs":500}'
  oke runs ls -addr http://127.0.0.1:8080 -token "$OKE_ADMIN_TOKEN"

Flags:
`, name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{err}
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
		fmt.Fprintf(stderr, "%v\n", err)
		fs.Usage()
		return &UsageError{err}
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "admin-token" {
			fmt.Fprintf(stderr, "%s: warning: -admin-token on the command line shows in ps to every user of this machine; prefer -admin-token-file or $OKE_ADMIN_TOKEN\n", name)
		}
	})
	return Run(ctx, cfg, stderr)
}

// Run opens the demo, listens on cfg.Addr and serves until ctx ends, then
// shuts down gracefully: it stops accepting requests and waits for running
// ones (http.Server.Shutdown), waits for flows (oke's App.Close), then
// closes the driver and the database. It logs to stderr.
func Run(ctx context.Context, cfg Config, stderr io.Writer) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	stopTracing, err := startTracing(ctx, stderr) // OTEL_EXPORTER_OTLP_ENDPOINT
	if err != nil {
		return err
	}
	defer stopTracing(5 * time.Second)
	s, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		s.Close(context.Background())
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	ln = s.Listener(ln)
	srv := s.HTTPServer()
	where := fmt.Sprintf("driver %s, data %s", cfg.Driver, cfg.DataDir)
	if cfg.Postgres != "" {
		where = "driver postgres, data in Postgres"
	}
	_, maxConns := s.Conns()
	fmt.Fprintf(stderr, "payments: listening on http://%s (%s, lease %s, at most %d connections, idle ones kept %s)\n",
		ln.Addr(), where, cfg.Lease, maxConns, cfg.IdleTimeout)
	if s.tokenFile != "" {
		// No token given: the drawn one is the only way in, so say where
		// it is (never the token: logs are read by more people than the
		// data folder's owner).
		fmt.Fprintf(stderr, "admin token: in %s (drawn at start; set one with -admin-token-file or $OKE_ADMIN_TOKEN)\n", s.tokenFile)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "payments: shutting down")
	case serveErr = <-errc:
		serveErr = fmt.Errorf("serve: %w", serveErr)
	}

	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	var errs []error
	if serveErr != nil {
		errs = append(errs, serveErr)
	}
	if err := srv.Shutdown(sctx); err != nil {
		errs = append(errs, fmt.Errorf("shut down the HTTP server: %w", err))
		srv.Close()
	}
	if err := s.Close(sctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		fmt.Fprintln(stderr, "payments: stopped")
	}
	return errors.Join(errs...)
}

// Exit turns Main's error into a process exit code, printing it to stderr
// as "name: error" unless the flag package already did: 0 for nil and
// flag.ErrHelp, 2 for a usage error, 1 otherwise.
func Exit(stderr io.Writer, name string, err error) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
