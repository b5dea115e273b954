package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/postgres"
)

// deferredApp is an app on a one-connection driver that counts round
// trips, with flows whose Idempotency-Key claim is deferred
// (oke.Idempotency.DeferClaim), each inserting a row into a table of its
// own through Fx.Tx:
//
//	/charges        the INSERT is the flow's first effect: the claim goes with it
//	/raw-first      an fx.Raw effect first, which makes the claim on its own
//	/fail-first     returns an error before any effect
//	/checked        the INSERT is the first effect, into a table whose CHECK
//	                refuses amounts of 0; declines (402) amounts over 1000
//
// The flows' claims are held in their transactions (oke.ClaimInTx).
type deferredApp struct {
	t       *testing.T
	d       *postgres.Driver
	rt      *roundTrips
	app     *oke.App
	table   string
	started atomic.Int64 // function starts
	stopped atomic.Int64 // effects that returned oke.ErrKeyNotClaimed
	raws    atomic.Int64 // fx.Raw effects that happened
}

// chargesTable creates a table of charges in d's schema and returns its
// quoted name.
func chargesTable(t testing.TB, d *postgres.Driver) string {
	t.Helper()
	table := pgx.Identifier{d.Schema(), "charges"}.Sanitize()
	if _, err := d.Pool().Exec(t.Context(), `CREATE TABLE `+table+` (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return table
}

// txCharge inserts a charge of amount into table through the flow's
// transaction (Fx.Tx) and returns its id.
func txCharge(ctx context.Context, fx *oke.Fx, table string, amount int64) (int64, error) {
	tx, err := fx.Tx(ctx)
	if err != nil {
		return 0, err
	}
	var id int64
	err = tx.QueryRow(ctx, `INSERT INTO `+table+` (amount) VALUES ($1) RETURNING id`, amount).Scan(&id)
	return id, err
}

func newDeferredApp(t *testing.T) *deferredApp {
	t.Helper()
	d, rt := roundTripDriver(t)
	a := &deferredApp{t: t, d: d, rt: rt, table: chargesTable(t, d)}
	checked := pgx.Identifier{d.Schema(), "checked"}.Sanitize()
	if _, err := d.Pool().Exec(t.Context(), `CREATE TABLE `+checked+` (amount bigint NOT NULL CHECK (amount > 0))`); err != nil {
		t.Fatal(err)
	}
	a.app = oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1})
	opts := oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimInTx}}
	type in struct{ Amount int64 }
	type out = oke.Response[map[string]any]
	insert := func(ctx context.Context, fx *oke.Fx, amount int64) (out, error) {
		id, err := txCharge(ctx, fx, a.table, amount)
		if err != nil {
			if errors.Is(err, oke.ErrKeyNotClaimed) {
				a.stopped.Add(1)
			}
			return out{}, fmt.Errorf("insert charge: %w", err)
		}
		return oke.Created(map[string]any{"id": id, "amount": amount}, fmt.Sprint("/charges/", id)), nil
	}
	a.app.Handle(oke.POST("/charges"), oke.NewFlow("deferred.charge", opts,
		func(ctx context.Context, in in, fx *oke.Fx) (out, error) {
			a.started.Add(1)
			return insert(ctx, fx, in.Amount)
		}))
	a.app.Handle(oke.POST("/raw-first"), oke.NewFlow("deferred.raw-first", opts,
		func(ctx context.Context, in in, fx *oke.Fx) (out, error) {
			a.started.Add(1)
			err := fx.Raw(ctx, "tell the provider", func(context.Context) error {
				a.raws.Add(1)
				return nil
			})
			if errors.Is(err, oke.ErrKeyNotClaimed) {
				a.stopped.Add(1)
			}
			if err != nil {
				return out{}, err
			}
			return insert(ctx, fx, in.Amount)
		}))
	a.app.Handle(oke.POST("/checked"), oke.NewFlow("deferred.checked", opts,
		func(ctx context.Context, in in, fx *oke.Fx) (out, error) {
			a.started.Add(1)
			tx, err := fx.Tx(ctx)
			if err != nil {
				return out{}, err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+checked+` (amount) VALUES ($1)`, in.Amount); err != nil {
				return out{}, fmt.Errorf("insert: %w", err)
			}
			if in.Amount > 1000 {
				return out{}, fx.Fail(http.StatusPaymentRequired, "PaymentDeclined", "Too much.")
			}
			return oke.Created(map[string]any{"amount": in.Amount}, ""), nil
		}))
	a.app.Handle(oke.POST("/fail-first"), oke.NewFlow("deferred.fail-first", opts,
		func(ctx context.Context, in in, fx *oke.Fx) (out, error) {
			a.started.Add(1)
			if in.Amount > 100 {
				return out{}, fx.Fail(http.StatusPaymentRequired, "PaymentDeclined", "Too much.")
			}
			return out{}, errors.New("the flow failed before any effect")
		}))
	if err := a.app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.app.Close(context.Background()) })
	return a
}

func (a *deferredApp) post(path, key string, amount int64) *httptest.ResponseRecorder {
	a.t.Helper()
	r := httptest.NewRequestWithContext(a.t.Context(), http.MethodPost, path, strings.NewReader(fmt.Sprintf(`{"Amount":%d}`, amount)))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.app.ServeHTTP(w, r)
	return w
}

func (a *deferredApp) rows() int {
	a.t.Helper()
	var n int
	if err := a.d.Pool().QueryRow(a.t.Context(), `SELECT count(*) FROM `+a.table).Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	return n
}

func (a *deferredApp) state(flow, key string) (driver.State, bool) {
	a.t.Helper()
	row, err := a.d.Get(a.t.Context(), driver.Key{Tenant: "default", Principal: "anon", Flow: flow, Key: key})
	if errors.Is(err, driver.ErrNotFound) {
		return 0, false
	}
	if err != nil {
		a.t.Fatal(err)
	}
	return row.State, true
}

// TestDeferredClaim is the table of what a keyed request of a flow whose
// claim is deferred sees and costs, counted in round trips on one warmed
// connection: the claim goes in the round trip of the flow's first
// statement, and a request whose key is not its own to run is stopped at
// that statement, which does not run.
//
// A claim held in the flow's transaction (ClaimInTx) costs the same round
// trips and answers the same, except where the transaction fails: its
// claim goes with it, and storing the failure claims the key again.
func TestDeferredClaim(t *testing.T) {
	t.Parallel()
	a := newDeferredApp(t)
	// Warm up: prepare every statement on the one connection.
	a.post("/checked", "warm-up-key-000000000001", 1)
	a.post("/checked", "warm-up-key-000000000002", 2000)
	for _, path := range []string{"/charges", "/raw-first"} {
		a.post(path, "warm-up-key-000000000001", 1000)
		if w := a.post(path, "warm-up-key-000000000001", 1000); w.Code != http.StatusCreated {
			t.Fatalf("warm-up replay %s: %d %s", path, w.Code, w.Body)
		}
	}
	a.post("/fail-first", "warm-up-key-000000000001", 1)    // released
	a.post("/fail-first", "warm-up-key-000000000002", 1000) // stored
	// A key another attempt of the same request holds: the next request
	// with it gets 409.
	warm, err := a.d.Get(t.Context(), driver.Key{Tenant: "default", Principal: "anon", Flow: "deferred.charge", Key: "warm-up-key-000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.d.Claim(t.Context(), driver.ClaimRequest{
		Key:         driver.Key{Tenant: "default", Principal: "anon", Flow: "deferred.charge", Key: "held-key-000000000000001"},
		Fingerprint: warm.Fingerprint, Owner: "another-attempt", Lease: time.Minute, TTL: time.Hour,
	}); err != nil || !res.Claimed {
		t.Fatalf("claim for another attempt: %+v, %v", res, err)
	}
	// Keys whose attempt's lease lapsed: the same request takes them over
	// (the first to warm up).
	for _, key := range []string{"lapsed-key-0000000000000", "lapsed-key-0000000000001"} {
		if res, err := a.d.Claim(t.Context(), driver.ClaimRequest{
			Key:         driver.Key{Tenant: "default", Principal: "anon", Flow: "deferred.charge", Key: key},
			Fingerprint: warm.Fingerprint, Owner: "a-lapsed-attempt", Lease: time.Millisecond, TTL: time.Hour,
		}); err != nil || !res.Claimed {
			t.Fatalf("claim for a lapsed attempt: %+v, %v", res, err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	if w := a.post("/charges", "lapsed-key-0000000000000", 1000); w.Code != http.StatusCreated {
		t.Fatalf("warm-up takeover: %d %s", w.Code, w.Body)
	}
	a.rt.take()
	// A failed INSERT is a failure before any effect: the key is free
	// again, since the claim went with the transaction; nothing to release.
	failedTrips := int64(2) // the pipeline; ROLLBACK
	// A declared failure after the INSERT is stored; the INSERT is rolled
	// back. The claim went with the transaction, so it is made again to
	// store the failure.
	declinedTrips := int64(4) // the pipeline; ROLLBACK; the claim; the completion

	for _, tc := range []struct {
		name      string
		path, key string
		amount    int64
		status    int
		replayed  bool
		trips     int64
		newRows   int
		stopped   int64 // effects refused with ErrKeyNotClaimed
		raws      int64
	}{
		{"live: claim + BEGIN + INSERT in one round trip; complete + COMMIT", "/charges", "charge-key-0000000000001", 1000, 201, false, 2, 1, 0, 0},
		{"replay: the claim stops the INSERT, which does not run", "/charges", "charge-key-0000000000001", 1000, 201, true, 1, 0, 1, 0},
		{"another request under the key: 422, nothing runs", "/charges", "charge-key-0000000000001", 2000, 422, false, 1, 0, 1, 0},
		{"key held by another attempt: 409, nothing runs", "/charges", "held-key-000000000000001", 1000, 409, false, 1, 0, 1, 0},
		{"key of an attempt whose lease lapsed: taken over", "/charges", "lapsed-key-0000000000001", 1000, 201, false, 2, 1, 0, 0},
		{"and replayed", "/charges", "lapsed-key-0000000000001", 1000, 201, true, 1, 0, 1, 0},
		{"the INSERT fails after its claim: 500, the key released", "/checked", "checked-key-000000000001", 0, 500, false, failedTrips, 0, 0, 0},
		{"so it runs again", "/checked", "checked-key-000000000001", 0, 500, false, failedTrips, 0, 0, 0},
		{"a declared failure after the INSERT: stored, the INSERT rolled back", "/checked", "checked-key-000000000002", 2000, 402, false, declinedTrips, 0, 0, 0},
		{"and replayed", "/checked", "checked-key-000000000002", 2000, 402, true, 1, 0, 0, 0},
		{"an effect before the INSERT claims first, in a round trip of its own", "/raw-first", "raw-key-0000000000000001", 1000, 201, false, 3, 1, 0, 1},
		{"replay of it: the effect does not happen", "/raw-first", "raw-key-0000000000000001", 1000, 201, true, 1, 0, 1, 0},
		{"a failure before any effect: claimed when the flow returns, then released", "/fail-first", "fail-key-000000000000001", 1, 500, false, 2, 0, 0, 0},
		{"a declared failure before any effect is stored", "/fail-first", "fail-key-000000000000002", 1000, 402, false, 2, 0, 0, 0},
		{"and replayed, the function's new answer unused", "/fail-first", "fail-key-000000000000002", 1000, 402, true, 1, 0, 0, 0},
	} {
		rows, started, stopped, raws := a.rows(), a.started.Load(), a.stopped.Load(), a.raws.Load()
		a.rt.take()
		w := a.post(tc.path, tc.key, tc.amount)
		trips, _, _ := a.rt.take()
		if w.Code != tc.status || (w.Header().Get("Idempotent-Replayed") == "true") != tc.replayed {
			t.Errorf("%s: %d %s (Idempotent-Replayed %q), want %d, replayed %v", tc.name, w.Code, w.Body,
				w.Header().Get("Idempotent-Replayed"), tc.status, tc.replayed)
		}
		if trips != tc.trips {
			t.Errorf("%s: %d round trips, want %d", tc.name, trips, tc.trips)
		}
		if got := a.rows() - rows; got != tc.newRows {
			t.Errorf("%s: %d rows inserted, want %d", tc.name, got, tc.newRows)
		}
		if got := a.started.Load() - started; got != 1 {
			t.Errorf("%s: the function started %d times, want 1", tc.name, got)
		}
		if got := a.stopped.Load() - stopped; got != tc.stopped {
			t.Errorf("%s: %d effects refused with ErrKeyNotClaimed, want %d", tc.name, got, tc.stopped)
		}
		if got := a.raws.Load() - raws; got != tc.raws {
			t.Errorf("%s: fx.Raw's effect happened %d times, want %d", tc.name, got, tc.raws)
		}
	}
	if st, ok := a.state("deferred.charge", "charge-key-0000000000001"); !ok || st != driver.Completed {
		t.Errorf("the live charge's key: %v (exists %v), want completed", st, ok)
	}
	var checkedRows int
	if err := a.d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{a.d.Schema(), "checked"}.Sanitize()+` WHERE amount > 1000`).Scan(&checkedRows); err != nil || checkedRows != 0 {
		t.Errorf("declined charges written: %d (%v), want 0: a declared failure rolls the flow's writes back", checkedRows, err)
	}
	if _, ok := a.state("deferred.fail-first", "fail-key-000000000000001"); ok {
		t.Error("a failure before any effect left its key claimed, want it released so the key may run again")
	}
	if w := a.post("/fail-first", "fail-key-000000000000001", 1); w.Code != http.StatusInternalServerError {
		t.Errorf("the released key again: %d, want the flow to run again (500)", w.Code)
	}
}

// Concurrent requests with one key run the flow's effects once: the
// others are stopped at their INSERT (replay or 409), and only one row is
// written.
// So do they when the claim is held in the flow's transaction
// (ClaimInTx): the others get 409 from its lock while it runs.
func TestDeferredClaimConcurrentRequestsWriteOnce(t *testing.T) {
	t.Parallel()
	var inserted atomic.Int64 // INSERTs that ran: one per key, or the claim did not exclude
	d := newDriver(t)
	table := chargesTable(t, d)
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1})
	app.Handle(oke.POST("/charges"), oke.NewFlow("deferred.charge",
		oke.Options{Idempotency: oke.Idempotency{Mode: oke.ModeRequired, Claim: oke.ClaimInTx}},
		func(ctx context.Context, in struct{ Amount int64 }, fx *oke.Fx) (oke.Response[map[string]int64], error) {
			id, err := txCharge(ctx, fx, table, in.Amount)
			if err != nil {
				return oke.Response[map[string]int64]{}, err
			}
			inserted.Add(1)
			time.Sleep(5 * time.Millisecond) // hold the key while the others arrive
			return oke.Created(map[string]int64{"id": id}, fmt.Sprint("/charges/", id)), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })

	const keys, per = 10, 8
	codes := make(chan int, keys*per)
	start := make(chan struct{})
	done := make(chan struct{})
	var n atomic.Int64
	for k := 0; k < keys; k++ {
		for i := 0; i < per; i++ {
			go func() {
				defer func() {
					if n.Add(1) == keys*per {
						close(done)
					}
				}()
				<-start
				r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/charges", strings.NewReader(`{"Amount":1000}`))
				r.Header.Set("Idempotency-Key", fmt.Sprintf("concurrent-key-%010d", k))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				app.ServeHTTP(w, r)
				codes <- w.Code
			}()
		}
	}
	close(start)
	<-done
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[201]+count[409] != keys*per || count[201] < keys {
		t.Errorf("answers %v, want only 201 (live or replayed) and 409, at least one 201 per key", count)
	}
	var rows int
	if err := d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != keys {
		t.Errorf("%d rows for %d keys, want one each", rows, keys)
	}
	if n := inserted.Load(); n != keys {
		t.Errorf("%d INSERTs ran for %d keys, want one each: the others' claims must stop theirs", n, keys)
	}
}

// ticket is a driver.ClaimTicket for the driver's own tests: it claims with
// the driver and records what the driver told it.
type ticket struct {
	req     driver.ClaimRequest
	taken   bool
	made    error // as Take reports a claim made already: nil (ours) or a refusal
	madeSet bool
	res     driver.ClaimResult
	err     error
	done    int
}

func (tk *ticket) Take() (driver.ClaimRequest, bool, error) {
	if tk.madeSet {
		return tk.req, false, tk.made
	}
	tk.taken = true
	return tk.req, true, nil
}

func (tk *ticket) Done(res driver.ClaimResult, err error) error {
	tk.done++
	tk.res, tk.err = res, err
	switch {
	case err != nil:
		return err
	case !res.Claimed:
		return errNotOurs
	}
	return nil
}

var errNotOurs = errors.New("not ours")

// After a claim sent ahead of a transaction is refused, the connection has
// no transaction, its statements fail with the refusal (none runs), its
// end succeeds without a round trip, and the connection serves the next
// transaction as new.
func TestBeginClaimedRefusedLeavesTheConnectionClean(t *testing.T) {
	t.Parallel()
	d, rt := roundTripDriver(t)
	ctx := t.Context()
	table := chargesTable(t, d)
	key := driver.Key{Tenant: "t", Principal: "anon", Flow: "f", Key: "refused-key-000000000001"}
	req := func(owner string) driver.ClaimRequest {
		return driver.ClaimRequest{Key: key, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour}
	}
	if res, err := d.Claim(ctx, req("first")); err != nil || !res.Claimed {
		t.Fatalf("first claim: %+v, %v", res, err)
	}
	insert := `INSERT INTO ` + table + ` (amount) VALUES ($1)`
	count := func() int {
		t.Helper()
		var n int
		if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, end := range []string{"ROLLBACK", "COMMIT"} {
		conn, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk := &ticket{req: req("second-" + end)}
		if err := d.BeginClaimed(ctx, conn, tk); err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(ctx, insert, 1)
		if !errors.Is(err, errNotOurs) || !tk.taken || tk.done != 1 || tk.res.Claimed || tk.res.Row.Owner != "first" {
			t.Fatalf("first statement behind a claim of a held key: %v (ticket %+v), want the refusal, the claim taken and told once", err, tk)
		}
		var one int
		if err := conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one); !errors.Is(err, errNotOurs) {
			t.Errorf("a later statement: %v, want the refusal", err)
		}
		if _, err := conn.ExecContext(ctx, insert, 2); !errors.Is(err, errNotOurs) {
			t.Errorf("a later INSERT: %v, want the refusal", err)
		}
		rt.take()
		if _, err := conn.ExecContext(ctx, end); err != nil {
			t.Errorf("%s after a refusal: %v", end, err)
		}
		if trips, _, _ := rt.take(); trips != 0 {
			t.Errorf("%s after a refusal: %d round trips, want 0", end, trips)
		}
		// The same connection serves the next transaction.
		if err := d.Begin(ctx, conn); err != nil {
			t.Fatalf("Begin after a refusal: %v", err)
		}
		if _, err := conn.ExecContext(ctx, insert, 3); err != nil {
			t.Fatalf("a statement in the next transaction: %v", err)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	if n := count(); n != 0 {
		t.Errorf("%d rows written, want none: refused statements do not run, the last transaction rolled back", n)
	}
}

// A connection that does not use prepared statements (pgx's simple
// protocol) makes the claim in a round trip of its own, then sends the
// statement with its BEGIN: the same outcome, one round trip more.
func TestBeginClaimedWithoutPreparedStatements(t *testing.T) {
	t.Parallel()
	url, _ := server(t)
	d := newDriverIn(t, url+"&default_query_exec_mode=simple_protocol", fmt.Sprintf("oke_test_simple_%d", schemaSeq.Add(1)))
	ctx := t.Context()
	key := driver.Key{Tenant: "t", Principal: "anon", Flow: "f", Key: "simple-key-0000000000001"}
	run := func(owner string) (*ticket, error) {
		conn, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tk := &ticket{req: driver.ClaimRequest{Key: key, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour}}
		if err := d.BeginClaimed(ctx, conn, tk); err != nil {
			t.Fatal(err)
		}
		var one int
		err = conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
		conn.ExecContext(ctx, "ROLLBACK")
		return tk, err
	}
	if tk, err := run("first"); err != nil || !tk.res.Claimed {
		t.Fatalf("first: %v, claimed %v; want the statement run under a new claim", err, tk.res.Claimed)
	}
	if tk, err := run("second"); !errors.Is(err, errNotOurs) || tk.res.Row.Owner != "first" {
		t.Fatalf("second: %v, row owner %q; want refused, held by first", err, tk.res.Row.Owner)
	}
}

// A prepared first statement whose table changed under it fails once
// ("cached plan must not change result type", as pgx's own cache does),
// and is prepared again for the next request.
func TestDeferredClaimStatementPreparedAgainAfterItsTableChanged(t *testing.T) {
	t.Parallel()
	a := newDeferredApp(t)
	if w := a.post("/charges", "stale-key-00000000000001", 1); w.Code != http.StatusCreated {
		t.Fatalf("first charge: %d %s", w.Code, w.Body)
	}
	if _, err := a.d.Pool().Exec(t.Context(), `DROP TABLE `+a.table+`; CREATE TABLE `+a.table+` (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	codes := []int{}
	for i := 2; i <= 4; i++ {
		codes = append(codes, a.post("/charges", fmt.Sprintf("stale-key-%014d", i), 1).Code)
	}
	if codes[len(codes)-1] != http.StatusCreated || codes[1] != http.StatusCreated {
		t.Errorf("charges after the table changed: %v, want at most the first to fail, then 201", codes)
	}
}

// A claim that fails in the server (here a key the server refuses: a NUL
// byte is not text in Postgres) is an error for the ticket and for the
// statement, which does not run; the connection is left with no
// transaction and serves the next one.
func TestBeginClaimedWhenTheClaimFails(t *testing.T) {
	t.Parallel()
	d, _ := roundTripDriver(t)
	ctx := t.Context()
	table := chargesTable(t, d)
	insert := `INSERT INTO ` + table + ` (amount) VALUES ($1)`
	send := func(key string) (*ticket, error) {
		t.Helper()
		conn, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tk := &ticket{req: driver.ClaimRequest{Key: driver.Key{Tenant: "t", Principal: "anon", Flow: "f", Key: key},
			Fingerprint: "fp", Owner: "owner-" + key, Lease: time.Minute, TTL: time.Hour}}
		if err := d.BeginClaimed(ctx, conn, tk); err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(ctx, insert, 1)
		if _, rerr := conn.ExecContext(ctx, "ROLLBACK"); rerr != nil {
			t.Errorf("ROLLBACK: %v", rerr)
		}
		return tk, err
	}
	if _, err := send("fine-key-000000000000001"); err != nil { // statements prepared
		t.Fatal(err)
	}
	tk, err := send("boom-key-\x00-00000000000001")
	if err == nil || tk.err == nil || tk.done != 1 || !strings.Contains(err.Error(), "0x00") {
		t.Fatalf("a claim the server refuses: statement error %v, ticket told %v (%d times); want the claim's error, told once", err, tk.err, tk.done)
	}
	var rows int
	if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d rows written (%v), want none: every transaction here rolled back or never began", rows, err)
	}
	if _, err := send("fine-key-000000000000002"); err != nil {
		t.Errorf("the next claimed transaction: %v", err)
	}
}

// heldTx begins a transaction on a new connection of d's DB whose claim of
// key is held in it (BeginClaimed), sends INSERT of amount into table
// with it, and returns the connection and what the claim's ticket was told.
// The connection goes back to the pool when the test ends, or when the
// test closes it (the pool is small: testPool).
func heldTx(t *testing.T, d *postgres.Driver, table string, key driver.Key, owner string, amount int64) (*sql.Conn, *ticket, error) {
	t.Helper()
	ctx := t.Context()
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tk := &ticket{req: driver.ClaimRequest{Key: key, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour}}
	if err := d.BeginClaimed(ctx, conn, tk); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, `INSERT INTO `+table+` (amount) VALUES ($1)`, amount)
	return conn, tk, err
}

// A claim held in a transaction: while the transaction is open, a second
// one on the key is refused as busy with the same request (409) and its
// INSERT does not run; no row exists until the first commits with its
// response, and then the next one sees that response. A transaction that
// rolls back leaves nothing: the key is free at once.
func TestHeldClaim(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	ctx := t.Context()
	table := chargesTable(t, d)
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "held-claim-key-000000001"}
	count := func() (charges int, row bool) {
		t.Helper()
		if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&charges); err != nil {
			t.Fatal(err)
		}
		_, err := d.Get(ctx, key)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			t.Fatal(err)
		}
		return charges, err == nil
	}

	first, tk1, err := heldTx(t, d, table, key, "first", 1)
	if err != nil || !tk1.res.Claimed || !tk1.res.InTx {
		t.Fatalf("first: %v, claim %+v; want the INSERT run under a claim held in its transaction", err, tk1.res)
	}
	if n, row := count(); n != 0 || row {
		t.Errorf("while the first runs: %d charges, row %v; want none visible", n, row)
	}
	second, tk2, err := heldTx(t, d, table, key, "second", 2)
	if !errors.Is(err, errNotOurs) || tk2.res.Claimed || !tk2.res.Busy || !tk2.res.BusySame {
		t.Errorf("second, while the first runs: %v, claim %+v; want it refused as busy with the same request", err, tk2.res)
	}
	second.Close()
	// The first rolls back: nothing of it remains, and the key is free.
	if _, err := first.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if n, row := count(); n != 0 || row {
		t.Errorf("after a rollback: %d charges, row %v; want none", n, row)
	}
	third, tk3, err := heldTx(t, d, table, key, "third", 3)
	if err != nil || !tk3.res.Claimed {
		t.Fatalf("third, after the rollback: %v, claim %+v; want it claimed", err, tk3.res)
	}
	resp := driver.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"amount":3}`)}
	if err := d.CommitComplete(ctx, third, key, "third", resp, time.Hour); err != nil {
		t.Fatalf("third's completion: %v", err)
	}
	third.Close()
	if n, row := count(); n != 1 || !row {
		t.Errorf("after the third committed: %d charges, row %v; want its charge and its row", n, row)
	}
	got, err := d.Get(ctx, key)
	if err != nil || got.State != driver.Completed || got.Response == nil || string(got.Response.Body) != `{"amount":3}` || got.Fingerprint != "fp" {
		t.Errorf("the stored row: %+v, %v; want the third's response, completed", got, err)
	}
	_, tk4, err := heldTx(t, d, table, key, "fourth", 4)
	if !errors.Is(err, errNotOurs) || tk4.res.Claimed || tk4.res.Row.Response == nil || string(tk4.res.Row.Response.Body) != `{"amount":3}` {
		t.Errorf("fourth: %v, claim %+v; want the stored response to replay, the INSERT not run", err, tk4.res)
	}
	if n, _ := count(); n != 1 {
		t.Errorf("%d charges, want 1", n)
	}
}

// An instance that claims the key on its own (without InTx: a claim takes
// no lock) while another holds it in its transaction: both run, and the
// completion decides. The held one's completion finds the row taken and
// fails (ErrNotOwner); its transaction, and its INSERT, roll back.
func TestHeldClaimLosesToAClaimMadeWithoutTheLock(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	ctx := t.Context()
	table := chargesTable(t, d)
	key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "held-claim-key-000000002"}
	held, tk, err := heldTx(t, d, table, key, "held", 1)
	if err != nil || !tk.res.Claimed {
		t.Fatalf("held: %v, %+v", err, tk.res)
	}
	res, err := d.Claim(ctx, driver.ClaimRequest{Key: key, Fingerprint: "fp", Owner: "other", Lease: time.Minute, TTL: time.Hour})
	if err != nil || !res.Claimed {
		t.Fatalf("a claim of its own meanwhile: %+v, %v; want it claimed (it takes no lock)", res, err)
	}
	err = d.CommitComplete(ctx, held, key, "held", driver.Response{Status: 201, Body: []byte(`{}`)}, time.Hour)
	if !errors.Is(err, driver.ErrNotOwner) {
		t.Errorf("the held claim's completion: %v, want ErrNotOwner", err)
	}
	var n int
	if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d charges (%v), want 0: the refused completion rolls its INSERT back", n, err)
	}
	if got, err := d.Get(ctx, key); err != nil || got.State != driver.Running || got.Owner != "other" {
		t.Errorf("the row: %+v, %v; want the other claim's, running", got, err)
	}
	// The connection is clean for its next transaction.
	var one int
	if err := held.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Errorf("the connection after: %v", err)
	}
}

// A held claim over an expired row replaces it with its response; so it
// does when the sweep deleted that row while the flow ran.
func TestHeldClaimReplacesAnExpiredRow(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	ctx := t.Context()
	table := chargesTable(t, d)
	for _, swept := range []bool{false, true} {
		key := driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: fmt.Sprintf("expired-key-swept-%v-0000", swept)}
		if res, err := d.Claim(ctx, driver.ClaimRequest{Key: key, Fingerprint: "old", Owner: "old", Lease: time.Minute, TTL: time.Millisecond}); err != nil || !res.Claimed {
			t.Fatalf("claim: %+v, %v", res, err)
		}
		if err := d.Complete(ctx, key, "old", driver.Response{Status: 200, Body: []byte(`"old"`)}, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		conn, tk, err := heldTx(t, d, table, key, "new", 1)
		if err != nil || !tk.res.Claimed || tk.res.Previous == nil || tk.res.TookOver {
			t.Fatalf("swept %v: %v, claim %+v; want the expired row replaced (not taken over)", swept, err, tk.res)
		}
		if swept {
			if _, err := d.Pool().Exec(ctx, `DELETE FROM `+pgx.Identifier{d.Schema(), "oke_idempotency"}.Sanitize()+` WHERE idem_key = $1`, key.Key); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.CommitComplete(ctx, conn, key, "new", driver.Response{Status: 201, Body: []byte(`"new"`)}, time.Hour); err != nil {
			t.Errorf("swept %v: completion: %v", swept, err)
		}
		got, err := d.Get(ctx, key)
		if err != nil || got.State != driver.Completed || got.Fingerprint != "fp" || string(got.Response.Body) != `"new"` {
			t.Errorf("swept %v: row %+v, %v; want the new response", swept, got, err)
		}
	}
}
