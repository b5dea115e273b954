// Command dbos is the payments demo's POST /charges and POST /pipeline
// written with DBOS Transact (github.com/dbos-inc/dbos-transact-golang), for
// the side-by-side load runs in scripts/pgloadbench (docs/BENCHMARKS.md
// sections 6 and 14). It is its own module so that oke never depends on DBOS.
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
//
// POST /pipeline ({"tag":str,"steps":int,"stepMs":int}) is the demo's
// demo.pipeline (DESIGN.md section 6): a workflow whose workflow id is the
// Idempotency-Key, with steps 1…n, each a RunAsTransaction that adds 1 to
// the execution count of (tag, i) in pipeline_counts (the demo's table and
// upsert); it answers 201 with {"tag","steps"} and Location
// /pipeline/{tag} once every step is done, and a retry with the key gets
// the recorded result. GET /pipeline/{tag} shows the counts, as the demo's
// demo.pipelineLog. By default the steps' data source is DBOS's own system
// pool (-pipeline-ds system): DBOS then runs each step as one transaction
// that holds the upsert and DBOS's record of the step (its fastest path, and
// the demo's shape: business tables and journal in one database);
// -pipeline-ds own gives it a pool of its own (the -pool connections, shared
// with /charges): the upsert and a completion row commit in one transaction,
// and DBOS's record of the step in a second one. A step's stepMs wait is
// taken in the workflow just before the step's transaction, so that the
// wait does not hold a pooled connection (the demo's step waits inside the
// step, which holds no connection while it waits either); the wait is not
// an effect, so where it runs does not change what is counted.
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
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
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

// The demo's pipeline_counts table (examples/payments/app/schema_postgres.sql).
const pipelineSchema = `CREATE TABLE IF NOT EXISTS pipeline_counts (
	tag        TEXT NOT NULL,
	step       BIGINT NOT NULL,
	executions BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (tag, step)
)`

// The demo's pipeline step (examples/payments/app/durable.go).
const countStep = `INSERT INTO pipeline_counts (tag, step, executions) VALUES ($1, $2, 1)
	ON CONFLICT (tag, step) DO UPDATE SET executions = pipeline_counts.executions + 1
	RETURNING executions`

// PipelineIn is the body of POST /pipeline (the demo's app.PipelineIn).
type PipelineIn struct {
	Tag    string `json:"tag"`
	Steps  int    `json:"steps"`
	StepMs int    `json:"stepMs"`
}

// Pipeline is the answer of POST /pipeline (the demo's app.Pipeline).
type Pipeline struct {
	Tag   string `json:"tag"`
	Steps int    `json:"steps"`
}

// PipelineStep is how many times one step of a pipeline ran.
type PipelineStep struct {
	Step       int `json:"step"`
	Executions int `json:"executions"`
}

// PipelineLog is the answer of GET /pipeline/{tag}.
type PipelineLog struct {
	Tag   string         `json:"tag"`
	Steps []PipelineStep `json:"steps"`
}

type server struct {
	count *counter
	dctx  dbos.Context
	pool  *pgxpool.Pool
	ds    *dbos.DataSource // with -tx
	pds   *dbos.DataSource // the pipeline's steps' data source
	pread *pgxpool.Pool    // where GET /pipeline/{tag} reads
}

// pipeline is the workflow of POST /pipeline: steps 1…n, each one
// transaction that counts its execution for (tag, i).
func (s *server) pipeline(ctx dbos.Context, in PipelineIn) (Pipeline, error) {
	for i := 1; i <= in.Steps; i++ {
		if err := wait(ctx, time.Duration(in.StepMs)*time.Millisecond); err != nil {
			return Pipeline{}, err
		}
		_, err := dbos.RunAsTransaction(ctx, s.pds, func(ctx context.Context, tx dbos.Tx) (int, error) {
			var n int
			if err := tx.QueryRow(ctx, countStep, in.Tag, i).Scan(&n); err != nil {
				return 0, fmt.Errorf("count step %d of pipeline %q: %w", i, in.Tag, err)
			}
			return n, nil
		}, dbos.WithStepName("step "+strconv.Itoa(i)))
		if err != nil {
			return Pipeline{}, err
		}
	}
	return Pipeline{Tag: in.Tag, Steps: in.Steps}, nil
}

// wait waits d, or until ctx ends (the demo's wait: a timer, not a durable
// sleep, which DBOS would record as a step of its own).
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (s *server) servePipeline(w http.ResponseWriter, r *http.Request) {
	s.count.requests.Add(1)
	key := r.Header.Get("Idempotency-Key")
	if len(key) < 16 || len(key) > 255 {
		fail(w, http.StatusBadRequest, "IdempotencyKeyInvalid", "Idempotency-Key must be 16–255 printable ASCII characters.")
		return
	}
	var in PipelineIn
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "InvalidInput", err.Error())
		return
	}
	if len(in.Tag) < 1 || len(in.Tag) > 200 || in.Steps < 0 || in.Steps > 1000 || in.StepMs < 0 || in.StepMs > 60000 {
		fail(w, http.StatusBadRequest, "InvalidInput", "tag must be 1–200 characters, steps 0–1000 and stepMs 0–60000")
		return
	}
	h, err := dbos.RunWorkflow(s.dctx, s.pipeline, in, dbos.WithWorkflowID(key))
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "Unavailable", err.Error())
		return
	}
	p, err := h.GetResult()
	if err != nil {
		fail(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	body, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/pipeline/"+url.PathEscape(p.Tag))
	w.WriteHeader(http.StatusCreated)
	w.Write(append(body, '\n'))
}

func (s *server) servePipelineLog(w http.ResponseWriter, r *http.Request) {
	tag := r.PathValue("tag")
	rows, err := s.pread.Query(r.Context(), `SELECT step, executions FROM pipeline_counts WHERE tag = $1 ORDER BY step`, tag)
	if err != nil {
		fail(w, http.StatusServiceUnavailable, "Unavailable", err.Error())
		return
	}
	out := PipelineLog{Tag: tag, Steps: []PipelineStep{}}
	for rows.Next() {
		var st PipelineStep
		if err := rows.Scan(&st.Step, &st.Executions); err != nil {
			rows.Close()
			fail(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		out.Steps = append(out.Steps, st)
	}
	if err := rows.Err(); err != nil {
		fail(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	body, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
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
	pipelineDS := flag.String("pipeline-ds", "system", "the `pool` of POST /pipeline's RunAsTransaction steps: system (DBOS's own: one transaction per step) or own (the charges pool: the step's transaction, then DBOS's record of it)")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("dbos: -postgres is required")
	}
	if *pipelineDS != "system" && *pipelineDS != "own" {
		log.Fatalf("dbos: -pipeline-ds is system or own, not %q", *pipelineDS)
	}
	if err := run(*addr, *dsn, *poolSize, *useTx, *count, *pipelineDS == "own"); err != nil {
		log.Fatalf("dbos: %v", err)
	}
}

func run(addr, dsn string, poolSize int, useTx, count, ownPipelinePool bool) error {
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
	if _, err := pool.Exec(ctx, pipelineSchema); err != nil {
		return fmt.Errorf("create pipeline_counts: %w", err)
	}
	dcfg := dbos.Config{
		AppName:     "oke-bench-dbos",
		DatabaseURL: dsn,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	// DBOS's own pool, made as NewSystemDatabase makes it for a DatabaseURL
	// (20 connections unless the DSN says pool_max_conns), here so that
	// POST /pipeline's data source can be that pool, and it can be traced.
	scfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		scfg.MaxConns = 20
	}
	scfg.MaxConnLifetime, scfg.MaxConnIdleTime = time.Hour, 5*time.Minute
	if count {
		scfg.ConnConfig.Tracer = cnt
	}
	if dcfg.SystemDBPool, err = pgxpool.NewWithConfig(ctx, scfg); err != nil {
		return err
	}
	defer dcfg.SystemDBPool.Close()
	if count {
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
	ppool := dcfg.SystemDBPool
	if ownPipelinePool {
		ppool = pool
	}
	s.pread = ppool
	if s.pds, err = dbos.NewDataSource(dctx, ppool, dbos.WithDataSourceName("pipeline")); err != nil {
		return err
	}
	dbos.RegisterWorkflow(dctx, s.charge, dbos.WithWorkflowName("payments.charge"))
	dbos.RegisterWorkflow(dctx, s.pipeline, dbos.WithWorkflowName("demo.pipeline"))
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	defer dbos.Shutdown(dctx, 5*time.Second)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /charges", s.serveCharge)
	mux.HandleFunc("POST /pipeline", s.servePipeline)
	mux.HandleFunc("GET /pipeline/{tag}", s.servePipelineLog)
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
	fmt.Fprintf(os.Stderr, "dbos: listening on http://%s (tx %v, pipeline on its own pool %v)\n", ln.Addr(), useTx, ownPipelinePool)
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
