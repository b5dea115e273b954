package postgres_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// Round trips are a behaviour, not a timing: each one is a network hop to
// the server and back, and under load a request's latency and the server's
// throughput follow them. These tests count them exactly.
//
// A round trip is counted where it happens: one write of the client's
// buffered messages to the socket, answered by the server before the next
// write (pgx sends a statement's Bind/Execute/Sync, or a Parse/Describe/Sync,
// in one write, and waits for ReadyForQuery). The counts are taken on a
// one-connection pool with its statements already prepared (pgx caches them
// per connection: the first use of a statement on a connection costs one
// more round trip, to prepare it), and with the pool's liveness ping off
// (pgxpool pings a connection that sat idle for a second; never under load).

// roundTrips counts the writes to the server's socket, which are the round
// trips (see above), and the statements pgx sends, per context marker.
type roundTrips struct {
	writes  atomic.Int64
	upkeep  atomic.Int64 // writes that only kept pgx's statement cache (see countingConn)
	queries atomic.Int64 // statements run (pgx QueryTracer), marked contexts only
	sqls    atomic.Pointer[[]string]
	dials   atomic.Int64 // connections dialed, the pool's and the driver's own listener's
}

type countKey struct{}

// mark returns a context whose statements the tracer counts.
func mark(ctx context.Context) context.Context { return context.WithValue(ctx, countKey{}, true) }

func (rt *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if ctx.Value(countKey{}) != nil {
		rt.queries.Add(1)
		for {
			old := rt.sqls.Load()
			var next []string
			if old != nil {
				next = append(next, *old...)
			}
			sql := strings.Join(strings.Fields(data.SQL), " ")
			if len(sql) > 60 {
				sql = sql[:60] + "…"
			}
			next = append(next, sql)
			if rt.sqls.CompareAndSwap(old, &next) {
				break
			}
		}
	}
	return ctx
}

func (rt *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A batch's statements count one by one too (they share a round trip).
func (rt *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (rt *roundTrips) TraceBatchQuery(ctx context.Context, c *pgx.Conn, data pgx.TraceBatchQueryData) {
	rt.TraceQueryStart(ctx, c, pgx.TraceQueryStartData{SQL: data.SQL})
}

func (rt *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take returns the counts since the last take and resets them.
func (rt *roundTrips) take() (writes, queries int64, sqls []string) {
	if p := rt.sqls.Swap(nil); p != nil {
		sqls = *p
	}
	return rt.writes.Swap(0), rt.queries.Swap(0), sqls
}

// countingConn counts writes to the server once the pool has handed the
// connection out (pooled), except those that only keep pgx's statement
// cache. A connection the pool never hands out is not counted: the driver's
// LISTEN connection (started by the app's Start, dialed with the pool's
// config, so through this DialFunc too) connects and LISTENs in the
// background, and on a loaded machine its writes fell into a counted
// request. The writes that only keep the cache are re-preparing a
// statement this connection prepared before, and deallocating statements.
// pgx drops a statement from its cache whenever a use of it fails (a
// test's failing INSERT, or the server's "cached plan must not change
// result type", which a shared server can raise when other clients' DDL
// floods its invalidation queue) and then deallocates and prepares it
// again: a cost of the cache, not of the operation being counted. They are
// counted apart, in rt.upkeep.
type countingConn struct {
	net.Conn
	rt       *roundTrips
	pooled   atomic.Bool     // the pool has handed it out (cfg.PrepareConn)
	prepared map[string]bool // statements Parse'd on this connection
}

func (c *countingConn) Write(b []byte) (int, error) {
	switch {
	case !c.pooled.Load():
		// Not one of the pool's: its startup, or the listener's.
	case isPing(b):
		// database/sql pings a connection it hands out after more than a
		// second idle (pgx stdlib's ResetSession): on a slow machine that
		// falls between two requests, and is no cost of either.
	case c.isUpkeep(b):
		c.rt.upkeep.Add(1)
	default:
		c.rt.writes.Add(1)
	}
	return c.Conn.Write(b)
}

// isUpkeep reports whether the write b only re-prepares statements this
// connection prepared before or deallocates statements (Parse, Describe,
// Close, Sync and Flush messages), and notes the statements b prepares.
func (c *countingConn) isUpkeep(b []byte) bool {
	upkeep, kept := true, false // kept: a Parse or a Close was seen
	for len(b) >= 5 {
		typ, n := b[0], int(binary.BigEndian.Uint32(b[1:5]))
		if n < 4 || 1+n > len(b) {
			return false // not a whole message: count it
		}
		body := b[5 : 1+n]
		switch typ {
		case 'P': // Parse: name, query, parameter types
			kept = true
			if name, rest, ok := bytes.Cut(body, []byte{0}); ok && len(name) > 0 {
				query, _, _ := bytes.Cut(rest, []byte{0})
				if !c.prepared[string(query)] {
					upkeep = false
					c.prepared[string(query)] = true
				}
			} else {
				upkeep = false // an unnamed statement is prepared for each use
			}
		case 'C':
			kept = true
		case 'D', 'S', 'H':
		default:
			upkeep = false
		}
		b = b[1+n:]
	}
	return upkeep && kept && len(b) == 0
}

// isPing reports whether b is pgconn's Ping: a simple Query of "-- ping".
func isPing(b []byte) bool {
	return len(b) > 5 && b[0] == 'Q' && bytes.Equal(bytes.TrimRight(b[5:], "\x00"), []byte("-- ping"))
}

// roundTripDriver returns a migrated driver on a schema of its own whose one
// connection counts its round trips.
func roundTripDriver(t *testing.T) (*postgres.Driver, *roundTrips) {
	t.Helper()
	url, _ := server(t)
	schema := fmt.Sprintf("oke_test_%d_%d", os.Getpid(), schemaSeq.Add(1))
	dropSchemaAtEnd(t, schema)
	cfg, err := pgxpool.ParseConfig(pgtest.Charge(t, pgtest.DriverConns(1)).DSN(url))
	if err != nil {
		t.Fatal(err)
	}
	rt := &roundTrips{}
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		cc, ok := c.PgConn().Conn().(*countingConn)
		if !ok {
			return false, fmt.Errorf("pool connection is a %T, not the counting one", c.PgConn().Conn())
		}
		cc.pooled.Store(true)
		return true, nil
	}
	cfg.ConnConfig.Tracer = rt
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		rt.dials.Add(1)
		return &countingConn{Conn: c, rt: rt, prepared: map[string]bool{}}, nil
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := postgres.Open(t.Context(), "", postgres.WithPool(pool), postgres.WithSchema(schema))
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		pool.Close()
	})
	if err := d.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d, rt
}

func TestRoundTripsPerOperation(t *testing.T) {
	t.Parallel()
	d, rt := roundTripDriver(t)
	ctx := t.Context()
	claim := func(ctx context.Context, key, owner string) driver.ClaimResult {
		t.Helper()
		res, err := d.Claim(ctx, driver.ClaimRequest{
			Key:         driver.Key{Tenant: "t", Principal: "anon", Flow: "payments.charge", Key: key},
			Fingerprint: "fp", Owner: owner, Lease: 30 * time.Second, TTL: time.Hour,
		})
		if err != nil {
			t.Fatalf("claim %s: %v", key, err)
		}
		return res
	}
	complete := func(ctx context.Context, key, owner string) {
		t.Helper()
		err := d.Complete(ctx, driver.Key{Tenant: "t", Principal: "anon", Flow: "payments.charge", Key: key}, owner,
			driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"id":"ch_1"}`)}, time.Hour)
		if err != nil {
			t.Fatalf("complete %s: %v", key, err)
		}
	}
	// Warm up: the one connection prepares the claim and complete
	// statements (a round trip each, once per connection).
	claim(ctx, "warm-up-key-000000000001", "o0")
	complete(ctx, "warm-up-key-000000000001", "o0")
	rt.take()

	check := func(op string, wantTrips int64, f func(ctx context.Context)) {
		t.Helper()
		f(mark(ctx))
		writes, queries, sqls := rt.take()
		if writes != wantTrips || queries != wantTrips {
			t.Errorf("%s: %d round trips (%d statements: %q), want %d", op, writes, queries, sqls, wantTrips)
		}
	}
	check("live claim of a new key", 1, func(ctx context.Context) {
		if res := claim(ctx, "charge-key-0000000000001", "o1"); !res.Claimed {
			t.Fatalf("claim of a new key: not claimed: %+v", res)
		}
	})
	check("complete (store the response)", 1, func(ctx context.Context) {
		complete(ctx, "charge-key-0000000000001", "o1")
	})
	check("replay of a completed key", 1, func(ctx context.Context) {
		res := claim(ctx, "charge-key-0000000000001", "o2")
		if res.Claimed || res.Row.State != driver.Completed || res.Row.Response == nil ||
			string(res.Row.Response.Body) != `{"id":"ch_1"}` {
			t.Fatalf("claim of a completed key: %+v, want the stored response", res)
		}
	})
	check("claim of a key still running", 1, func(ctx context.Context) {
		claim(ctx, "charge-key-0000000000002", "o3")
	})
	rt.take()
	check("in progress (a second claim of a running key)", 1, func(ctx context.Context) {
		if res := claim(ctx, "charge-key-0000000000002", "o4"); res.Claimed || res.Row.State != driver.Running {
			t.Fatalf("claim of a running key: %+v, want not claimed, running", res)
		}
	})
}

// TestRoundTripsPerKeyedRequest counts what a keyed POST costs end to end,
// through oke's HTTP handling on the Postgres driver: a replay is one round
// trip (the claim statement returns the stored response), a live request
// two (claim; complete) plus the flow's own statements; a live request whose
// flow writes through Fx.Tx (its write and the stored response commit
// together) three, for five statements: claim; BEGIN with the INSERT (the
// transaction begins lazily); the complete with the COMMIT.
func TestRoundTripsPerKeyedRequest(t *testing.T) {
	t.Parallel()
	d, rt := roundTripDriver(t)
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1})
	var runs atomic.Int64
	app.Handle(oke.POST("/charges"), oke.NewFlow("payments.charge",
		oke.Options{Idempotency: oke.Required, Effects: []oke.Effect{oke.EffectWrite}},
		func(ctx context.Context, in struct{ Amount int64 }, fx *oke.Fx) (oke.Response[map[string]any], error) {
			runs.Add(1)
			return oke.Created(map[string]any{"id": "ch_1", "amount": in.Amount}, "/charges/ch_1"), nil
		}))
	table := chargesTable(t, d)
	app.Handle(oke.POST("/charges-tx"), oke.NewFlow("payments.charge-tx",
		oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in struct{ Amount int64 }, fx *oke.Fx) (oke.Response[map[string]any], error) {
			runs.Add(1)
			id, err := txCharge(ctx, fx, table, in.Amount)
			if err != nil {
				return oke.Response[map[string]any]{}, err
			}
			return oke.Created(map[string]any{"id": id, "amount": in.Amount}, fmt.Sprint("/charges/", id)), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })

	post := func(path, key string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequestWithContext(mark(t.Context()), http.MethodPost, path, strings.NewReader(`{"Amount":1000}`))
		r.Header.Set("Idempotency-Key", key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	// Warm up: prepare every statement on the one connection.
	for _, path := range []string{"/charges", "/charges-tx"} {
		post(path, "warm-up-key-000000000001")
		if w := post(path, "warm-up-key-000000000001"); w.Code != http.StatusCreated {
			t.Fatalf("warm-up replay %s: %d %s", path, w.Code, w.Body)
		}
	}
	rt.take()

	for _, tc := range []struct {
		name      string
		path, key string
		wantTrips int64
		replayed  bool
		wantStmts int64 // when it differs from wantTrips
	}{
		{"live request: claim, complete", "/charges", "charge-key-0000000000001", 2, false, 0},
		{"replay: the claim returns the stored response", "/charges", "charge-key-0000000000001", 1, true, 0},
		{"second replay", "/charges", "charge-key-0000000000001", 1, true, 0},
		{"live request with Fx.Tx: claim; begin + insert pipelined; complete + commit pipelined", "/charges-tx", "charge-key-0000000000002", 3, false, 5},
		{"replay of a request that used Fx.Tx", "/charges-tx", "charge-key-0000000000002", 1, true, 0},
	} {
		before := runs.Load()
		w := post(tc.path, tc.key)
		writes, queries, sqls := rt.take()
		if w.Code != http.StatusCreated || (w.Header().Get("Idempotent-Replayed") == "true") != tc.replayed {
			t.Fatalf("%s: %d %q (Idempotent-Replayed %q), want 201, replayed %v", tc.name, w.Code, w.Body,
				w.Header().Get("Idempotent-Replayed"), tc.replayed)
		}
		if ran := runs.Load() - before; ran != map[bool]int64{false: 1, true: 0}[tc.replayed] {
			t.Errorf("%s: the flow ran %d times", tc.name, ran)
		}
		wantStmts := tc.wantStmts
		if wantStmts == 0 {
			wantStmts = tc.wantTrips
		}
		if writes != tc.wantTrips || queries != wantStmts {
			t.Errorf("%s: %d round trips (%d statements: %q), want %d (%d statements); %d connections dialed so far", tc.name, writes, queries, sqls, tc.wantTrips, wantStmts, rt.dials.Load())
		}
	}
}

// A step saved in a flow's transaction (CommitStep) is one round trip: the
// fenced save and the COMMIT in one pipeline. When the save is refused —
// another owner, or not the next step — the transaction is rolled back, the
// step's writes with it, and the error says which.
func TestCommitStepIsOneRoundTripAndRollsBackWhenRefused(t *testing.T) {
	t.Parallel()
	d, rt := roundTripDriver(t)
	ctx := t.Context()
	table := pgx.Identifier{d.Schema(), "payments"}.Sanitize()
	if _, err := d.Pool().Exec(ctx, `CREATE TABLE `+table+` (seq int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateRun(ctx, driver.Run{ID: "run-1", Flow: "f", Owner: "o"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	commit := func(owner string, seq int) (trips int64, err error) {
		t.Helper()
		conn, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := d.Begin(ctx, conn); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO `+table+` VALUES ($1)`, seq); err != nil {
			t.Fatal(err)
		}
		rt.take()
		err = d.CommitStep(mark(ctx), conn, "run-1", owner, driver.Step{Seq: seq, Name: fmt.Sprint("step ", seq), Result: []byte(`1`), Attempts: 1})
		trips, _, _ = rt.take()
		return trips, err
	}
	written := func(seq int) bool {
		t.Helper()
		var n int
		if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE seq = $1`, seq).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if _, err := commit("o", 1); err != nil { // warm up: statements prepared
		t.Fatalf("CommitStep of step 1: %v", err)
	}
	if trips, err := commit("o", 2); err != nil || trips != 1 || !written(2) {
		t.Fatalf("CommitStep of step 2: %v, %d round trips, written %v; want nil, 1, true", err, trips, written(2))
	}
	if _, err := commit("o", 4); !errors.Is(err, driver.ErrStepOrder) || written(4) {
		t.Errorf("CommitStep of step 4 after 2: %v, written %v; want ErrStepOrder, rolled back", err, written(4))
	}
	if _, err := commit("someone-else", 3); !errors.Is(err, driver.ErrNotOwner) || written(3) {
		t.Errorf("CommitStep by another owner: %v, written %v; want ErrNotOwner, rolled back", err, written(3))
	}
	if _, steps, err := d.GetRun(ctx, "run-1"); err != nil || len(steps) != 2 {
		t.Errorf("GetRun: %d steps, %v; want the 2 committed", len(steps), err)
	}
	if _, err := commit("o", 3); err != nil || !written(3) {
		t.Errorf("CommitStep of step 3 after the refusals: %v, written %v", err, written(3))
	}
}

// TestCountingLeavesOutStatementCacheUpkeep: a statement whose use failed is
// deallocated and prepared again at its next use (pgx drops it from its
// cache); those two round trips are the cache's, and the counts above leave
// them out, while a statement's first preparation on a connection counts.
func TestCountingLeavesOutStatementCacheUpkeep(t *testing.T) {
	t.Parallel()
	d, rt := roundTripDriver(t)
	ctx := t.Context()
	const q = `SELECT $1::int + 0`
	var n int
	rt.take()
	rt.upkeep.Swap(0)
	if err := d.Pool().QueryRow(ctx, q, 1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if writes, _, _ := rt.take(); writes != 2 || rt.upkeep.Swap(0) != 0 {
		t.Fatalf("first use: %d round trips, want 2 (prepare, execute) and no upkeep", writes)
	}
	if err := d.Pool().QueryRow(ctx, q, "not a number").Scan(&n); err == nil {
		t.Fatal("a text that is no int was taken for one")
	}
	rt.take()
	if err := d.Pool().QueryRow(ctx, q, 2).Scan(&n); err != nil || n != 2 {
		t.Fatalf("after a failed use: %d, %v", n, err)
	}
	writes, _, _ := rt.take()
	if upkeep := rt.upkeep.Swap(0); writes != 1 || upkeep != 2 {
		t.Fatalf("after a failed use: %d round trips and %d of upkeep, want 1 (execute) and 2 (deallocate, prepare again)", writes, upkeep)
	}
}
