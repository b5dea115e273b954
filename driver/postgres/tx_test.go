package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/okengine/oke/internal/pgtest"
)

// chargeApp is an app on d whose POST /charges inserts a row into a charges
// table of d's schema through the flow's transaction, then calls after (if
// set) with the transaction: the exactly-once path for writes to the
// store's own database.
type chargeApp struct {
	*oke.App
	d     *postgres.Driver
	table string
	runs  atomic.Int32
}

func newChargeApp(t *testing.T, d *postgres.Driver, lease time.Duration, after func(ctx context.Context, attempt int32, tx *oke.Tx, fx *oke.Fx) error) *chargeApp {
	t.Helper()
	ca := &chargeApp{d: d, table: pgx.Identifier{d.Schema(), "charges"}.Sanitize()}
	if _, err := d.Pool().Exec(t.Context(), `CREATE TABLE `+ca.table+` (id bigserial PRIMARY KEY, amount int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ca.App = oke.New(oke.Config{Driver: d, Lease: lease, SweepInterval: -1, PollInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	type in struct {
		Amount int `json:"amount"`
	}
	type charge struct {
		ID     int64 `json:"id"`
		Amount int   `json:"amount"`
	}
	ca.Handle(oke.POST("/charges"), oke.NewFlow("pg.charge", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in in, fx *oke.Fx) (oke.Response[charge], error) {
			attempt := ca.runs.Add(1)
			tx, err := fx.Tx(ctx)
			if err != nil {
				return oke.Response[charge]{}, err
			}
			c := charge{Amount: in.Amount}
			if err := tx.QueryRow(ctx, `INSERT INTO `+ca.table+` (amount) VALUES ($1) RETURNING id`, in.Amount).Scan(&c.ID); err != nil {
				return oke.Response[charge]{}, err
			}
			if after != nil {
				if err := after(ctx, attempt, tx, fx); err != nil {
					return oke.Response[charge]{}, err
				}
			}
			return oke.Created(c, ""), nil
		}))
	if err := ca.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ca.Close(context.Background()) })
	return ca
}

func (ca *chargeApp) post(key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":700}`))
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	ca.ServeHTTP(w, r)
	return w
}

func (ca *chargeApp) rows(t *testing.T) int {
	t.Helper()
	var n int
	if err := ca.d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+ca.table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (ca *chargeApp) row(t *testing.T, key string) driver.Row {
	t.Helper()
	row, err := ca.d.Get(t.Context(), driver.Key{Tenant: "default", Principal: "anon", Flow: "pg.charge", Key: key})
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return row
}

func TestFlowWritesCommitWithTheStoredResponse(t *testing.T) {
	ca := newChargeApp(t, newDriver(t), 0, nil)
	first := ca.post("tx-key-0000-commit")
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	if row := ca.row(t, "tx-key-0000-commit"); row.State != driver.Completed || row.Response == nil || string(row.Response.Body) != first.Body.String() {
		t.Fatalf("row after the flow: %+v, want it completed with the response %s", row, first.Body)
	}
	again := ca.post("tx-key-0000-commit")
	if again.Code != http.StatusCreated || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("retry: %d replayed=%q %s, want the first response replayed", again.Code, again.Header().Get("Idempotent-Replayed"), again.Body)
	}
	if n := ca.rows(t); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

func TestDeclaredFailureRollsTheFlowsWritesBack(t *testing.T) {
	ca := newChargeApp(t, newDriver(t), 0, func(ctx context.Context, _ int32, _ *oke.Tx, fx *oke.Fx) error {
		return fx.Fail(http.StatusPaymentRequired, "PaymentDeclined", "The card was declined.")
	})
	w := ca.post("tx-key-0000-declined")
	if w.Code != http.StatusPaymentRequired {
		t.Fatalf("got %d %s, want 402", w.Code, w.Body)
	}
	if n := ca.rows(t); n != 0 {
		t.Fatalf("charges = %d after a declared failure, want 0 (rolled back)", n)
	}
	if again := ca.post("tx-key-0000-declined"); again.Code != http.StatusPaymentRequired || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s, want the 402 replayed", again.Code, again.Body)
	}
}

func TestFailureWithOnlyRolledBackWritesLetsTheKeyRunAgain(t *testing.T) {
	ca := newChargeApp(t, newDriver(t), 0, func(ctx context.Context, attempt int32, _ *oke.Tx, _ *oke.Fx) error {
		if attempt == 1 {
			return errors.New("the provider timed out")
		}
		return nil
	})
	if w := ca.post("tx-key-0000-retry"); w.Code != http.StatusInternalServerError {
		t.Fatalf("first: %d %s, want 500", w.Code, w.Body)
	}
	if n := ca.rows(t); n != 0 {
		t.Fatalf("charges = %d after a failed attempt, want 0", n)
	}
	// Its only write was rolled back: nothing changed the world, so the key
	// was released and the retry runs the flow.
	if w := ca.post("tx-key-0000-retry"); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d replayed=%q %s, want a live 201", w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	if n := ca.rows(t); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

// The connection breaks after the flow wrote and before the commit: neither
// the charge nor the response is stored; once the lease lapses the retry
// runs the flow, and there is one charge in the end.
func TestLostConnectionBeforeCommitStoresNeitherWriteNorResponse(t *testing.T) {
	ca := newChargeApp(t, newDriver(t), 500*time.Millisecond, func(ctx context.Context, attempt int32, tx *oke.Tx, _ *oke.Fx) error {
		if attempt > 1 {
			return nil
		}
		return killTx(ctx, t, tx)
	})
	w := ca.post("tx-key-0000-lost")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("first: %d %s, want 503", w.Code, w.Body)
	}
	if n := ca.rows(t); n != 0 {
		t.Fatalf("charges = %d after the connection broke before the commit, want 0", n)
	}
	if row := ca.row(t, "tx-key-0000-lost"); row.State != driver.Running {
		t.Fatalf("row = %+v, want it still running (left to lapse)", row)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w = ca.post("tx-key-0000-lost")
		if w.Code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if w.Code != http.StatusCreated {
		t.Fatalf("retry after the lease lapsed: %d %s, want 201", w.Code, w.Body)
	}
	if n := ca.rows(t); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

// An attempt stalls past its lease; a retry takes the key over and charges.
// When the stalled attempt goes on, its completion is fenced by its owner
// token: it cannot commit, its charge is rolled back, and it answers what
// the row holds now — the takeover's stored response — never its own.
func TestAnAttemptThatLostItsKeyCannotCommitItsWrites(t *testing.T) {
	_, admin := server(t)
	stalled, resume := make(chan struct{}), make(chan struct{})
	d := newDriver(t)
	ca := newChargeApp(t, d, 0, func(ctx context.Context, attempt int32, _ *oke.Tx, _ *oke.Fx) error {
		if attempt == 1 {
			close(stalled)
			<-resume
		}
		return nil
	})
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- ca.post("tx-key-0000-fenced") }()
	<-stalled
	// The stalled attempt's lease lapses (as after a long GC pause or a
	// partition that kept it from renewing).
	if _, err := admin.Exec(t.Context(), `UPDATE `+pgx.Identifier{d.Schema(), "oke_idempotency"}.Sanitize()+
		` SET lease_until = now() - interval '1 second' WHERE idem_key = 'tx-key-0000-fenced'`); err != nil {
		t.Fatal(err)
	}
	second := ca.post("tx-key-0000-fenced")
	if second.Code != http.StatusCreated || second.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("takeover: %d %s, want a live 201", second.Code, second.Body)
	}
	close(resume)
	if w := <-first; w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != second.Body.String() {
		t.Fatalf("the stalled attempt: %d %s, want the takeover's stored response %s, replayed", w.Code, w.Body, second.Body)
	}
	if n := ca.rows(t); n != 1 {
		t.Fatalf("charges = %d, want 1: the stalled attempt's write must be rolled back", n)
	}
	again := ca.post("tx-key-0000-fenced")
	if again.Code != http.StatusCreated || again.Body.String() != second.Body.String() {
		t.Fatalf("retry: %d %s, want the takeover's response %s", again.Code, again.Body, second.Body)
	}
}

// Flows that hold their transaction and start runs (Emit to an OnEvent
// flow) need the driver's connections too: with a pool of two and twenty
// such requests at once, every request must still finish.
func TestFlowsHoldingTransactionsDoNotStarveTheDriver(t *testing.T) {
	url, admin := server(t)
	pgtest.Need(t, 2*pgtest.DriverConns(2))
	base := newDriver(t)
	c := pgtest.Charge(t, pgtest.DriverConns(2))
	appName := c.Tag()
	d, err := postgres.Open(t.Context(), c.DSN(pgtest.WithPoolSize(url, 2)), postgres.WithSchema(base.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	// On a deadlock the pool never gets its connections back and Close
	// would wait for them: close only what finished.
	finished := false
	defer func() {
		if finished {
			d.Close()
		}
	}()
	table := pgx.Identifier{d.Schema(), "notes"}.Sanitize()
	if _, err := admin.Exec(t.Context(), `CREATE TABLE `+table+` (id bigserial PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	app.Handle(oke.POST("/notes"), oke.NewFlow("pg.note", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			tx, err := fx.Tx(ctx)
			if err != nil {
				return oke.Response[int]{}, err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+table+` DEFAULT VALUES`); err != nil {
				return oke.Response[int]{}, err
			}
			return oke.OK(1), fx.Emit(ctx, "note.added", struct{}{})
		}))
	app.Handle(oke.OnEvent("note.added"), oke.NewFlow("pg.on-note", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) { return oke.OK(1), nil }))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		app.Close(ctx)
	}()

	const n = 20
	codes := make(chan int, n)
	for i := range n {
		go func() {
			r := httptest.NewRequest("POST", "/notes", strings.NewReader(`{}`))
			r.Header.Set("Idempotency-Key", fmt.Sprintf("tx-key-starve-%04d", i))
			w := httptest.NewRecorder()
			app.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	timeout := time.After(60 * time.Second)
	for range n {
		select {
		case c := <-codes:
			if c != http.StatusOK {
				t.Errorf("status %d, want 200", c)
			}
		case <-timeout:
			// Break the deadlock so that the test can clean up and end.
			admin.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, appName)
			t.Fatal("requests still waiting after 60 s: flows holding transactions starved the driver of connections")
		}
	}
	finished = true
	var notes int
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	if notes != n {
		t.Fatalf("notes = %d, want %d", notes, n)
	}
}

// killTx ends the server process behind tx's connection, and waits until
// it is gone (it told the client first).
func killTx(ctx context.Context, t *testing.T, tx *oke.Tx) error {
	_, admin := server(t)
	var pid int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return err
	}
	var ended bool
	if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 60000)`, pid).Scan(&ended); err != nil {
		return err
	}
	if !ended {
		return fmt.Errorf("server process %d still there 60s after pg_terminate_backend", pid)
	}
	return nil
}

// useKilledTx kills tx's connection and then uses it: it must fail (what
// the flow or step returns), naming what.
func useKilledTx(ctx context.Context, t *testing.T, tx *oke.Tx, what string) error {
	if err := killTx(ctx, t, tx); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return errors.New("the statement on a terminated connection worked")
}

// A flow whose transaction loses its connection fails with a 503 (the
// database was unreachable: retry), not a 500, and — its write rolled back —
// leaves the key free for the retry. The function ran, so the 503 is not
// StoreUnavailable ("not run") but Unavailable ("nothing was changed").
func TestLostConnectionInsideTheFlowAnswers503(t *testing.T) {
	ca := newChargeApp(t, newDriver(t), 0, func(ctx context.Context, attempt int32, tx *oke.Tx, _ *oke.Fx) error {
		if attempt > 1 {
			return nil
		}
		return useKilledTx(ctx, t, tx, "check the charge")
	})
	w := ca.post("tx-key-0000-lost-503")
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"Unavailable"`) {
		t.Fatalf("first: %d %s, want 503 Unavailable", w.Code, w.Body)
	}
	if w := ca.post("tx-key-0000-lost-503"); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry: %d %s, want a live 201", w.Code, w.Body)
	}
	if n := ca.rows(t); n != 1 {
		t.Fatalf("charges = %d, want 1", n)
	}
}

// stepApp is an app on d whose POST /pay runs a durable flow with one step,
// "charge", that inserts a row through the step's transaction and then calls
// during (if set).
func stepApp(t *testing.T, d *postgres.Driver, during func(ctx context.Context, attempt int32, tx *oke.Tx) error) (*oke.App, string) {
	t.Helper()
	table := pgx.Identifier{d.Schema(), "payments"}.Sanitize()
	if _, err := d.Pool().Exec(t.Context(), `CREATE TABLE `+table+` (id bigserial PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var attempts atomic.Int32
	app.Handle(oke.POST("/pay"), oke.NewFlow("pg.pay", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int64], error) {
			id, err := oke.Step(ctx, "charge", func(ctx context.Context) (int64, error) {
				tx, err := fx.Tx(ctx)
				if err != nil {
					return 0, err
				}
				var id int64
				if err := tx.QueryRow(ctx, `INSERT INTO `+table+` DEFAULT VALUES RETURNING id`).Scan(&id); err != nil {
					return 0, err
				}
				if during != nil {
					if err := during(ctx, attempts.Add(1), tx); err != nil {
						return 0, err
					}
				}
				return id, nil
			})
			if err != nil {
				return oke.Response[int64]{}, err
			}
			return oke.OK(id), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	return app, table
}

func count(t *testing.T, d *postgres.Driver, table string) int {
	t.Helper()
	var n int
	if err := d.Pool().QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStepWritesCommitWithTheSavedStep(t *testing.T) {
	d := newDriver(t)
	app, table := stepApp(t, d, nil)
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/pay", strings.NewReader(`{}`)))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	runs, err := d.ListRuns(t.Context(), driver.RunFilter{Flow: "pg.pay"}, 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	_, steps, err := d.GetRun(t.Context(), runs[0].ID)
	if err != nil || len(steps) != 1 || string(steps[0].Result) != strings.TrimSpace(w.Body.String()) {
		t.Fatalf("steps %+v (%v), want the charge saved with the id %s", steps, err, w.Body)
	}
	if n := count(t, d, table); n != 1 {
		t.Fatalf("payments = %d, want 1", n)
	}
}

// A step whose run was taken over while it ran cannot save: its save is
// fenced by the run's owner, and its writes, in the same transaction, are
// rolled back with it.
func TestAStepThatLostItsRunCannotCommitItsWrites(t *testing.T) {
	_, admin := server(t)
	d := newDriver(t)
	runs := pgx.Identifier{d.Schema(), "oke_runs"}.Sanitize()
	app, table := stepApp(t, d, func(ctx context.Context, attempt int32, _ *oke.Tx) error {
		// Another process takes the run over (its lease lapsed while this
		// one stalled).
		_, err := admin.Exec(ctx, `UPDATE `+runs+` SET owner = 'another-process'`)
		return err
	})
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/pay", strings.NewReader(`{}`)))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503 (the step could not be saved)", w.Code, w.Body)
	}
	if n := count(t, d, table); n != 0 {
		t.Fatalf("payments = %d, want 0: the step's write must roll back with its fenced save", n)
	}
}

// A step whose transaction loses its connection does not fail the run: the
// request answers 503 and the run waits for a retry, like a run whose save
// could not reach the store.
func TestLostConnectionInsideAStepRetriesTheRun(t *testing.T) {
	d := newDriver(t)
	app, table := stepApp(t, d, func(ctx context.Context, attempt int32, tx *oke.Tx) error {
		return useKilledTx(ctx, t, tx, "check the payment")
	})
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/pay", strings.NewReader(`{}`)))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s, want 503", w.Code, w.Body)
	}
	runs, err := d.ListRuns(t.Context(), driver.RunFilter{Flow: "pg.pay"}, 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	if r := runs[0]; r.Status != driver.RunRunning || r.Steps != 0 || !r.WakeAt.After(time.Now()) {
		t.Fatalf("run %s, %d steps, wake %v: want it running, no step saved, parked for a retry", r.Status, r.Steps, r.WakeAt)
	}
	if n := count(t, d, table); n != 0 {
		t.Fatalf("payments = %d, want 0", n)
	}
}
