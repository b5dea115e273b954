// Command dbos is the payments demo's POST /charges written with DBOS
// Transact (github.com/dbos-inc/dbos-transact-golang), for the side-by-side
// load run in scripts/pgloadbench (docs/BENCHMARKS.md section 6). It is its
// own module so that oke never depends on DBOS.
//
// The same work as oke's payments.charge: the request's Idempotency-Key is
// the DBOS workflow id; the workflow has one step that inserts a charge row
// (the demo's charges table and INSERT, in this program's own database) and
// returns it; the handler answers 201 with the charge as JSON and its
// Location. A retry with the same key gets the recorded result (DBOS does
// not run a completed workflow id again).
//
//	go run . -addr 127.0.0.1:8090 -postgres 'postgres://postgres@127.0.0.1:5432/dbos_bench?sslmode=disable'
//
// DBOS keeps its system tables (schema dbos) in the same database. Its pool
// is DBOS's default for a DatabaseURL (20 connections, see
// internal/sysdb NewSystemDatabase); the charges pool gets as many, unless
// -pool says otherwise. -tx runs the insert as a DBOS transaction
// (RunAsTransaction on a DataSource: the insert and DBOS's record of the
// step commit together) instead of a plain step.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// counter counts the statements sent on a pool (one round trip each once
// pgx has prepared them) and the transactions that end in a commit; with
// -count the program prints them per request when it stops.
type counter struct {
	statements, commits, requests atomic.Int64

	mu    sync.Mutex
	bySQL map[string]int64 // statements by their first words
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.statements.Add(1)
	words := strings.Fields(data.SQL)
	key := strings.Join(words[:min(len(words), 7)], " ")
	c.mu.Lock()
	if c.bySQL == nil {
		c.bySQL = map[string]int64{}
	}
	c.bySQL[key]++
	c.mu.Unlock()
	if strings.EqualFold(strings.TrimSpace(data.SQL), "commit") {
		c.commits.Add(1)
	}
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The demo's charges table (examples/payments/app/schema_postgres.sql).
const schema = `CREATE TABLE IF NOT EXISTS charges (
	id         TEXT PRIMARY KEY DEFAULT ('ch_' || substr(md5(gen_random_uuid()::text), 1, 24)),
	seq        BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
	amount     BIGINT NOT NULL CHECK (amount > 0),
	currency   TEXT NOT NULL,
	tenant     TEXT NOT NULL DEFAULT 'default',
	principal  TEXT NOT NULL DEFAULT 'anon',
	created_at TEXT NOT NULL DEFAULT (to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
)`

// The demo's charge INSERT (examples/payments/app/charges.go).
const insertCharge = `INSERT INTO charges (amount, currency, tenant, principal) VALUES ($1, $2, $3, $4)
	RETURNING id, amount, currency, created_at`

// ChargeIn is the body of POST /charges.
type ChargeIn struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Charge is a charge as the API shows it.
type Charge struct {
	ID        string `json:"id"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	CreatedAt string `json:"createdAt"`
}

type server struct {
	count *counter
	dctx  dbos.Context
	pool  *pgxpool.Pool
	ds    *dbos.DataSource // with -tx
}

// charge is the workflow: one step that inserts the charge.
func (s *server) charge(ctx dbos.Context, in ChargeIn) (Charge, error) {
	if s.ds != nil {
		return dbos.RunAsTransaction(ctx, s.ds, func(ctx context.Context, tx dbos.Tx) (Charge, error) {
			var c Charge
			err := tx.QueryRow(ctx, insertCharge, in.Amount, in.Currency, "default", "anon").
				Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt)
			return c, err
		}, dbos.WithStepName("insert charge"))
	}
	return dbos.RunAsStep(ctx, func(ctx context.Context) (Charge, error) {
		var c Charge
		err := s.pool.QueryRow(ctx, insertCharge, in.Amount, in.Currency, "default", "anon").
			Scan(&c.ID, &c.Amount, &c.Currency, &c.CreatedAt)
		return c, err
	}, dbos.WithStepName("insert charge"))
}

func (s *server) serveCharge(w http.ResponseWriter, r *http.Request) {
	s.count.requests.Add(1)
	key := r.Header.Get("Idempotency-Key")
	if len(key) < 16 || len(key) > 255 {
		fail(w, http.StatusBadRequest, "IdempotencyKeyInvalid", "Idempotency-Key must be 16–255 printable ASCII characters.")
		return
	}
	var in ChargeIn
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "InvalidInput", err.Error())
		return
	}
	in.Currency = strings.ToLower(in.Currency)
	if in.Amount <= 0 || len(in.Currency) != 3 {
		fail(w, http.StatusBadRequest, "InvalidInput", "amount must be positive and currency a three-letter code")
		return
	}
	h, err := dbos.RunWorkflow(s.dctx, s.charge, in, dbos.WithWorkflowID(key))
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "Unavailable", err.Error())
		return
	}
	c, err := h.GetResult()
	if err != nil {
		fail(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	body, _ := json.Marshal(c)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/charges/"+c.ID)
	w.WriteHeader(http.StatusCreated)
	w.Write(append(body, '\n'))
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "listen on this `address`")
	dsn := flag.String("postgres", "", "the `DSN` of this program's database (DBOS's system tables and the charges table)")
	poolSize := flag.Int("pool", 20, "`connections` in the charges pool (DBOS's system pool keeps its own default, 20)")
	useTx := flag.Bool("tx", false, "insert with RunAsTransaction (the insert and DBOS's step record in one transaction) instead of RunAsStep")
	count := flag.Bool("count", false, "count the statements and explicit commits on both pools, and print them per request on exit")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("dbos: -postgres is required")
	}
	if err := run(*addr, *dsn, *poolSize, *useTx, *count); err != nil {
		log.Fatalf("dbos: %v", err)
	}
}

func run(addr, dsn string, poolSize int, useTx, count bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cnt := &counter{}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(poolSize)
	if count {
		cfg.ConnConfig.Tracer = cnt
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create charges: %w", err)
	}
	dcfg := dbos.Config{
		AppName:     "oke-bench-dbos",
		DatabaseURL: dsn,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if count {
		// DBOS's own pool, as NewSystemDatabase makes it for a DatabaseURL
		// (20 connections unless the DSN says pool_max_conns), traced.
		scfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return err
		}
		if !strings.Contains(dsn, "pool_max_conns") {
			scfg.MaxConns = 20
		}
		scfg.MaxConnLifetime, scfg.MaxConnIdleTime = time.Hour, 5*time.Minute
		scfg.ConnConfig.Tracer = cnt
		if dcfg.SystemDBPool, err = pgxpool.NewWithConfig(ctx, scfg); err != nil {
			return err
		}
		defer dcfg.SystemDBPool.Close()
		defer func() {
			n := max(cnt.requests.Load(), 1)
			fmt.Fprintf(os.Stderr, "dbos: %d requests: %.2f statements, %.2f explicit commits per request\n",
				cnt.requests.Load(), float64(cnt.statements.Load())/float64(n), float64(cnt.commits.Load())/float64(n))
			keys := make([]string, 0, len(cnt.bySQL))
			for k := range cnt.bySQL {
				keys = append(keys, k)
			}
			sort.Slice(keys, func(i, j int) bool { return cnt.bySQL[keys[i]] > cnt.bySQL[keys[j]] })
			for _, k := range keys {
				if per := float64(cnt.bySQL[k]) / float64(n); per >= 0.01 {
					fmt.Fprintf(os.Stderr, "  %5.2f  %s\n", per, k)
				}
			}
		}()
	}
	dctx, err := dbos.NewContext(ctx, dcfg)
	if err != nil {
		return err
	}
	s := &server{count: cnt, dctx: dctx, pool: pool}
	if useTx {
		if s.ds, err = dbos.NewDataSource(dctx, pool, dbos.WithDataSourceName("charges")); err != nil {
			return err
		}
	}
	dbos.RegisterWorkflow(dctx, s.charge, dbos.WithWorkflowName("payments.charge"))
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	defer dbos.Shutdown(dctx, 5*time.Second)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", s.serveCharge)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := pool.Ping(r.Context()); err != nil {
			fail(w, http.StatusServiceUnavailable, "Unhealthy", err.Error())
			return
		}
		io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "dbos: listening on http://%s (tx %v)\n", ln.Addr(), useTx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
