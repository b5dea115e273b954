package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
)

// coalescedApp is an app on a one-connection driver that counts its round
// trips, with durable flows whose contract says Coalesced (every non-read
// effect a statement in its steps' Fx.Tx), as oke extract writes it.
type coalescedApp struct {
	t     *testing.T
	app   *oke.App
	d     *postgres.Driver
	rt    *roundTrips
	table string
	fails atomic.Int32 // the next n step functions fail with a plain error
	ran   atomic.Int32 // step functions run
}

type pipeIn struct {
	Steps int  `json:"steps"`
	Sleep bool `json:"sleep,omitempty"`
}

func newCoalescedApp(t *testing.T, poll time.Duration, opts ...func(*oke.Config)) *coalescedApp {
	t.Helper()
	d, rt := roundTripDriver(t)
	c := &coalescedApp{t: t, d: d, rt: rt, table: pgx.Identifier{d.Schema(), "counts"}.Sanitize()}
	if _, err := d.Pool().Exec(t.Context(), `CREATE TABLE `+c.table+` (tag text NOT NULL, step int NOT NULL, n int NOT NULL, PRIMARY KEY (tag, step))`); err != nil {
		t.Fatal(err)
	}
	cfg := oke.Config{Driver: d, SweepInterval: -1, PollInterval: poll}
	for _, o := range opts {
		o(&cfg)
	}
	c.app = oke.New(cfg)
	flow := oke.NewFlow("t.coalesced", oke.Options{Durable: true}, func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[int], error) {
		for i := 1; i <= in.Steps; i++ {
			if _, err := oke.Step(ctx, fmt.Sprint("step ", i), func(ctx context.Context) (int, error) {
				c.ran.Add(1)
				tx, err := fx.Tx(ctx)
				if err != nil {
					return 0, err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO `+c.table+` (tag, step, n) VALUES ($1, $2, 1)
					ON CONFLICT (tag, step) DO UPDATE SET n = `+c.table+`.n + 1`, oke.StepKey(ctx), i); err != nil {
					return 0, err
				}
				if c.fails.Add(-1) >= 0 {
					return 0, errors.New("the provider hiccuped")
				}
				return i, nil
			}, oke.Retry(oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond})); err != nil {
				return oke.Response[int]{}, err
			}
			if in.Sleep && i == 1 {
				if err := oke.Sleep(ctx, "nap", 200*time.Millisecond); err != nil {
					return oke.Response[int]{}, err
				}
			}
		}
		return oke.Created(in.Steps, ""), nil
	})
	oke.RegisterContract(oke.Contract{Version: 1, Flows: []oke.ContractFlow{{
		Name: "t.coalesced", Shape: "unary", Durable: true,
		Idempotency: oke.ContractIdempotency{Mode: "auto"},
		Bindings:    []oke.ContractBinding{{Kind: "http", Method: "POST", Path: "/pipe"}},
		Effects:     []oke.Effect{oke.EffectWrite},
		Coalesced:   true,
	}}})
	c.app.Handle(oke.POST("/pipe"), flow)
	if err := c.app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.app.Close(context.Background()) })
	return c
}

func (c *coalescedApp) post(body, key string) *httptest.ResponseRecorder {
	c.t.Helper()
	r := httptest.NewRequestWithContext(mark(c.t.Context()), http.MethodPost, "/pipe", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	c.app.ServeHTTP(w, r)
	return w
}

// runOf returns the one run the key started, and its step names.
func (c *coalescedApp) runOf(key string) (driver.Run, []string) {
	c.t.Helper()
	runs, err := c.d.ListRuns(c.t.Context(), driver.RunFilter{Flow: "t.coalesced"}, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	var found []driver.Run
	for _, r := range runs {
		if r.IdemKey != nil && r.IdemKey.Key == key {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		c.t.Fatalf("key %s started %d runs, want 1: %+v", key, len(found), found)
	}
	run, steps, err := c.d.GetRun(c.t.Context(), found[0].ID)
	if err != nil {
		c.t.Fatal(err)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	return run, names
}

// TestCoalescedRunIsOneCommit: a keyed request of a coalesced durable flow
// with N steps costs N+1 round trips and one commit — the claim goes with the
// first step's statement, every step's write shares the one transaction,
// and the run, its steps and the stored answer go with the COMMIT — and
// leaves the same journal as the usual path: the run completed with its
// steps, the key replaying its answer.
func TestCoalescedRunIsOneCommit(t *testing.T) {
	t.Parallel()
	c := newCoalescedApp(t, -1) // no scheduler: its polls would share the counted connection
	// Warm up: prepare every statement on the one connection.
	c.post(`{"steps":3}`, "warm-up-key-000000000001")
	c.rt.take()
	for _, steps := range []int{1, 3, 10} {
		// Warm up right before, with as many steps: the one connection then
		// has every statement of this shape prepared, whatever happened to
		// it since (a reconnect re-prepares them, a round trip each).
		c.post(fmt.Sprintf(`{"steps":%d}`, steps), fmt.Sprintf("coalesced-warm-%010d", steps))
		c.rt.take()
		key := fmt.Sprintf("coalesced-key-%010d", steps)
		w := c.post(fmt.Sprintf(`{"steps":%d}`, steps), key)
		trips, _, sqls := c.rt.take()
		if w.Code != http.StatusCreated {
			t.Fatalf("%d steps: %d %s", steps, w.Code, w.Body)
		}
		if want := int64(steps + 1); trips != want {
			t.Errorf("%d steps: %d round trips (%q), want %d: the first step's statement with the claim, one per later step, the commit", steps, trips, sqls, want)
		}
		commits := 0
		for _, q := range sqls {
			if strings.HasPrefix(q, "COMMIT") {
				commits++
			}
		}
		if commits != 1 {
			t.Errorf("%d steps: %d commits (%q), want 1", steps, commits, sqls)
		}
		run, names := c.runOf(key)
		if run.Status != driver.RunCompleted || run.Result == nil || run.Result.Status != 201 || len(names) != steps || run.Owner != "" {
			t.Errorf("%d steps: run %s owned by %q, result %+v, steps %q", steps, run.Status, run.Owner, run.Result, names)
		}
		if again := c.post(fmt.Sprintf(`{"steps":%d}`, steps), key); again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("%d steps: the retry: %d replayed=%q", steps, again.Code, again.Header().Get("Idempotent-Replayed"))
		}
		c.rt.take()
	}
}

// TestCoalescedRunParksAndGoesOn: a durable sleep ends the one transaction
// there — the run is written sleeping with the steps so far, the key stores
// the 204 — and the scheduler finishes the run the usual way.
func TestCoalescedRunParksAndGoesOn(t *testing.T) {
	t.Parallel()
	c := newCoalescedApp(t, 5*time.Millisecond)
	key := "coalesced-sleep-key-0000001"
	w := c.post(`{"steps":3,"sleep":true}`, key)
	if w.Code != http.StatusNoContent || w.Header().Get("Oke-Run-Id") == "" {
		t.Fatalf("%d %v %s, want 204 naming the run", w.Code, w.Header(), w.Body)
	}
	run, names := c.runOf(key)
	if run.Status != driver.RunSleeping || strings.Join(names, ",") != "step 1,nap" {
		t.Fatalf("parked: run %s, steps %q; want sleeping after step 1 and the nap", run.Status, names)
	}
	deadline := time.Now().Add(30 * time.Second)
	for run.Status != driver.RunCompleted {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %s (%s)", run.Status, run.Error)
		}
		time.Sleep(10 * time.Millisecond)
		run, names = c.runOf(key)
	}
	if strings.Join(names, ",") != "step 1,nap,step 2,step 3" || c.ran.Load() != 3 {
		t.Fatalf("steps %q, step functions ran %d times; want each once", names, c.ran.Load())
	}
	if again := c.post(`{"steps":3,"sleep":true}`, key); again.Code != 204 {
		t.Fatalf("a retry replays the 204: %d", again.Code)
	}
}

// TestCoalescedRunFallsBack: a step that fails once sends the request back
// to the usual path, from the start: the first attempt's writes roll back
// with its claim, and the usual path retries the step. Every step's write
// happens once.
func TestCoalescedRunFallsBack(t *testing.T) {
	t.Parallel()
	c := newCoalescedApp(t, 5*time.Millisecond)
	c.fails.Store(1) // step 1's first attempt
	key := "coalesced-fallback-key-0001"
	w := c.post(`{"steps":3}`, key)
	if w.Code != http.StatusCreated {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	run, names := c.runOf(key)
	if run.Status != driver.RunCompleted || len(names) != 3 {
		t.Fatalf("run %s, steps %q", run.Status, names)
	}
	var rows, sum int
	if err := c.d.Pool().QueryRow(t.Context(), `SELECT count(*), coalesce(sum(n), 0) FROM `+c.table).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	// Step 1's attempts: the coalesced one (rolled back), then on the usual
	// path one that failed (its write rolled back with its step's
	// transaction) and one that succeeded.
	if rows != 3 || sum != 3 {
		t.Fatalf("%d rows counting %d writes, want 3 and 3 (each step's write once)", rows, sum)
	}
}

// TestCoalescedRunOverAnExpiredRow: a key whose row has expired is claimed
// again by a coalesced run, which replaces the row in its one statement
// (insertRunReplacedSQL) and links it to the new run.
func TestCoalescedRunOverAnExpiredRow(t *testing.T) {
	t.Parallel()
	c := newCoalescedApp(t, -1)
	key := "coalesced-expired-key-00001"
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.coalesced", Key: key}
	res, err := c.d.Claim(t.Context(), driver.ClaimRequest{Key: k, Fingerprint: "an older request", Owner: "old", Lease: time.Minute, TTL: time.Millisecond})
	if err != nil || !res.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if err := c.d.Complete(t.Context(), k, "old", driver.Response{Status: 200, Body: []byte(`1`)}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past its TTL, by the server's clock too
	w := c.post(`{"steps":2}`, key)
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("%d %s (replayed %q), want a live 201", w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
	}
	run, names := c.runOf(key)
	row, err := c.d.Get(t.Context(), k)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != driver.RunCompleted || len(names) != 2 || row.State != driver.Completed || row.RunID != run.ID || row.Response == nil || row.Response.Status != 201 {
		t.Fatalf("run %s with steps %q; row %+v linked to %q", run.Status, names, row, row.RunID)
	}
}

// TestCoalescedRunKeepsItsTrace: a traced keyed request of a coalesced
// flow writes its run and its answer in the one statement sent with the
// COMMIT (insertRunCompletedSQL, or insertRunReplacedSQL over an expired
// row), and both keep the request's trace: the run's Trace, what a resume
// links to, and the answer's, what a replay links to.
func TestCoalescedRunKeepsItsTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	c := newCoalescedApp(t, -1, func(cfg *oke.Config) { cfg.TracerProvider = tp })
	expired := "coalesced-trace-expired-0001"
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.coalesced", Key: expired}
	if res, err := c.d.Claim(t.Context(), driver.ClaimRequest{Key: k, Fingerprint: "an older request", Owner: "old", Lease: time.Minute, TTL: time.Millisecond}); err != nil || !res.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	old := driver.Response{Status: 200, Body: []byte(`1`), Trace: "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"}
	if err := c.d.Complete(t.Context(), k, "old", old, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past its TTL, by the server's clock too
	for _, key := range []string{"coalesced-trace-fresh-00001", expired} {
		rec.Reset()
		c.rt.take()
		if w := c.post(`{"steps":2}`, key); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%s: %d %s, want a live 201", key, w.Code, w.Body)
		}
		_, _, sqls := c.rt.take()
		// The run's insert, and no statement of the key's row of its own
		// (the usual path's completion): the one statement wrote both.
		runs, rows := 0, 0
		for _, q := range sqls {
			if strings.HasPrefix(q, "WITH r AS") && strings.Contains(q, ".oke_runs") {
				runs++
			}
			if strings.Contains(q, ".oke_idempotency") {
				rows++
			}
		}
		if runs != 1 || rows != 0 {
			t.Fatalf("%s: statements %q: want the run and the key's row written together, with the COMMIT", key, sqls)
		}
		var server trace.SpanContext
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindServer {
				server = s.SpanContext()
			}
		}
		if !server.IsValid() {
			t.Fatalf("%s: no server span", key)
		}
		want := server.TraceID().String() + "-"
		run, _ := c.runOf(key)
		row, err := c.d.Get(t.Context(), driver.Key{Tenant: "default", Principal: "anon", Flow: "t.coalesced", Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(run.Trace, want) || len(run.Trace) != 32+1+16 {
			t.Errorf("%s: run's Trace %q, want the request's (trace %s)", key, run.Trace, server.TraceID())
		}
		if row.Response == nil || !strings.HasPrefix(row.Response.Trace, want) || len(row.Response.Trace) != 32+1+16 {
			t.Errorf("%s: the answer's Trace %+v, want the request's (trace %s)", key, row.Response, server.TraceID())
		}
	}
}
