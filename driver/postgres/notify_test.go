package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
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

// wait is how long a test waits for something that should happen at once:
// generous, because it bounds a failure, not a speed.
const wait = 10 * time.Second

// hourPoll is a poll interval no test outlives: whatever a scheduler does
// in these tests, a notification or a timer made it do it.
const hourPoll = time.Hour

// sameSchema opens a second driver on d's schema, as another instance of
// the app would (the test declares it needs two drivers: twoDrivers).
func sameSchema(t testing.TB, d *postgres.Driver) *postgres.Driver {
	t.Helper()
	url, _ := server(t)
	return openDriver(t, url, testPool, postgres.WithSchema(d.Schema()))
}

// twoDrivers declares that the test opens two drivers (newDriver and
// sameSchema).
func twoDrivers(t testing.TB) { pgtest.Need(t, 2*pgtest.DriverConns(testPool)) }

// listenerPID waits until a session LISTENs on channel and returns its
// backend PID; not is a PID to ignore (a terminated listener's).
func listenerPID(t testing.TB, admin *pgxpool.Pool, channel string, not int32) int32 {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		var pid int32
		err := admin.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE query = $1 AND pid <> $2 ORDER BY backend_start DESC LIMIT 1`,
			"LISTEN "+pgx.Identifier{channel}.Sanitize(), not).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("look for the listener of %s: %v", channel, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session LISTENs on %s after %v", channel, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// receive waits for a signal on c, or fails the test saying what was
// expected.
func receive(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(wait):
		t.Fatalf("no wake-up signal %s within %v", what, wait)
	}
}

// TestWatchDueHearsRunsMadeDueByAnotherDriver: a run created unowned and
// due, a run released, and a run parked by one instance each signal the
// watchers of another instance on the same schema.
func TestWatchDueHearsRunsMadeDueByAnotherDriver(t *testing.T) {
	twoDrivers(t)
	a := newDriver(t)
	defer a.Close()
	b := sameSchema(t, a)
	c, stop := b.WatchDue()
	defer stop()
	receive(t, c, "once the listener is up")
	ctx := t.Context()

	if _, err := a.CreateRun(ctx, driver.Run{ID: "run-new", Flow: "f"}, 0); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "after another instance created an unowned run")

	if _, _, err := a.AcquireRun(ctx, "run-new", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.FinishRun(ctx, "run-new", "w", driver.Finish{Status: driver.RunRunning, WakeAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "after another instance released a run")

	if _, _, err := a.AcquireRun(ctx, "run-new", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := a.FinishRun(ctx, "run-new", "w", driver.Finish{Status: driver.RunSleeping,
		WakeAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "after another instance parked a run in a sleep")
}

// TestListenerReconnectsAfterItsConnectionIsKilled: the server terminates
// the listener's session; the listener connects again, signals once (it may
// have missed notifications), and delivers the next notification.
func TestListenerReconnectsAfterItsConnectionIsKilled(t *testing.T) {
	_, admin := server(t)
	twoDrivers(t)
	a := newDriver(t)
	defer a.Close()
	b := sameSchema(t, a)
	c, stop := b.WatchDue()
	defer stop()
	receive(t, c, "once the listener is up")
	old := listenerPID(t, admin, b.WakeChannel(), 0)

	var killed bool
	if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", old).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", old, killed, err)
	}
	receive(t, c, "after the listener reconnected")
	if pid := listenerPID(t, admin, b.WakeChannel(), old); pid == old {
		t.Fatalf("the listener's PID is still %d", pid)
	}

	if _, err := a.CreateRun(t.Context(), driver.Run{ID: "run-after", Flow: "f"}, 0); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "for a run created after the reconnect")
}

// TestWakeChannelIsPerSchemaAndFitsAnIdentifier: each schema has its own
// channel, and a schema name too long to prefix still gets a channel that
// LISTEN and pg_notify agree on.
func TestWakeChannelIsPerSchemaAndFitsAnIdentifier(t *testing.T) {
	pgtest.Need(t, 4*pgtest.DriverConns(testPool))
	a := newDriver(t)
	defer a.Close()
	b := newDriver(t)
	defer b.Close()
	if a.WakeChannel() == b.WakeChannel() || !strings.Contains(a.WakeChannel(), a.Schema()) {
		t.Fatalf("channels %q and %q for schemas %q and %q", a.WakeChannel(), b.WakeChannel(), a.Schema(), b.Schema())
	}

	url, _ := server(t)
	long := fmt.Sprintf("oke_test_%d_a_schema_name_long_enough_to_need_a_hash_", os.Getpid())
	long += strings.Repeat("x", 63-len(long))
	l := newDriverIn(t, url, long)
	defer l.Close()
	if n := len(l.WakeChannel()); n > 63 {
		t.Fatalf("channel %q is %d bytes, more than an identifier holds", l.WakeChannel(), n)
	}
	l2 := sameSchema(t, l)
	c, stop := l2.WatchDue()
	defer stop()
	receive(t, c, "once the listener is up")
	if _, err := l.CreateRun(t.Context(), driver.Run{ID: "run-long", Flow: "f"}, 0); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "on the hashed channel")
}

// TestNextDueIsTheEarliestParkedWakeTime: NextDue counts unowned runs not
// due yet, on the database's clock; runs due now and held runs are not
// counted.
func TestNextDueIsTheEarliestParkedWakeTime(t *testing.T) {
	d := newDriver(t)
	defer d.Close()
	ctx := t.Context()
	if _, ok, err := d.NextDue(ctx, nil); err != nil || ok {
		t.Fatalf("NextDue on an empty journal = %v, %v; want none", ok, err)
	}
	mustCreate := func(r driver.Run) {
		t.Helper()
		if _, err := d.CreateRun(ctx, r, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(driver.Run{ID: "due-now", Flow: "f"})
	mustCreate(driver.Run{ID: "held", Flow: "f", Owner: "w"})
	if _, ok, err := d.NextDue(ctx, nil); err != nil || ok {
		t.Fatalf("NextDue with only a due run and a held one = %v, %v; want none", ok, err)
	}
	mustCreate(driver.Run{ID: "in-2h", Flow: "f", WakeAt: time.Now().Add(2 * time.Hour)})
	mustCreate(driver.Run{ID: "in-1h", Flow: "f", WakeAt: time.Now().Add(time.Hour)})
	got, ok, err := d.NextDue(ctx, nil)
	if err != nil || !ok || got <= 0 || got > time.Hour {
		t.Fatalf("NextDue = %v, %v, %v; want the run due in an hour (0 < wait ≤ 1h)", got, ok, err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.NextDue(ctx, nil); err == nil {
		t.Fatal("NextDue on a closed driver succeeded")
	}
}

// echoIn is the input of the durable flows of the app tests.
type echoIn struct {
	N int `json:"n"`
}

// TestRunEnqueuedOnOneAppRunsOnAnother: app A (no scheduler) starts a run
// with oke.Run; app B, on the same schema and polling once an hour, executes
// it — only the notification can have told B.
func TestRunEnqueuedOnOneAppRunsOnAnother(t *testing.T) {
	twoDrivers(t)
	da := newDriver(t)
	defer da.Close()
	db := sameSchema(t, da)
	ran := make(chan string, 4)
	work := func(app string) *oke.Flow[echoIn, int] {
		return oke.NewFlow("n.work", oke.Options{Durable: true},
			func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[int], error) {
				ran <- app
				return oke.OK(in.N), nil
			})
	}
	workA := work("A")
	a := startApp(t, oke.Config{Driver: da, PollInterval: -1}, func(app *oke.App) {
		app.Handle(oke.Internal(), workA)
		app.Handle(oke.POST("/start"), oke.NewFlow("n.start", oke.Options{Idempotency: oke.Off},
			func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[string], error) {
				id, err := oke.Run(ctx, fx, workA, in)
				return oke.OK(id), err
			}))
	})
	startApp(t, oke.Config{Driver: db, PollInterval: hourPoll}, func(app *oke.App) {
		app.Handle(oke.Internal(), work("B"))
	})
	_, admin := server(t)
	listenerPID(t, admin, db.WakeChannel(), 0)

	for i := range 3 { // one after another: each must be woken for
		w := post(t, a, "/start", fmt.Sprintf(`{"n": %d}`, i))
		if w.Code != 200 {
			t.Fatalf("POST /start: %d %s", w.Code, w.Body)
		}
		select {
		case app := <-ran:
			if app != "B" {
				t.Fatalf("run %d executed by app %s, want B (A has no scheduler)", i, app)
			}
		case <-time.After(wait):
			t.Fatalf("run %d enqueued on A was not executed by B within %v (B polls hourly)", i, wait)
		}
		waitStatus(t, da, "n.work", i+1, driver.RunCompleted)
	}
}

// TestSleepParkedOnOneAppWakesOnAnother: a durable flow served over HTTP on
// app A (no scheduler) sleeps; app B, polling once an hour, finishes it when
// the sleep ends — told of the park by the notification, woken by the timer
// NextDue armed.
func TestSleepParkedOnOneAppWakesOnAnother(t *testing.T) {
	twoDrivers(t)
	da := newDriver(t)
	defer da.Close()
	db := sameSchema(t, da)
	testSleepWakes(t, da, db)
}

// TestSleepWakesWithoutPolling: the same on one app: its own park nudges
// it, and NextDue's timer wakes the run.
func TestSleepWakesWithoutPolling(t *testing.T) {
	d := newDriver(t)
	defer d.Close()
	testSleepWakes(t, d, nil)
}

// testSleepWakes serves a sleeping flow on an app on da; when db is not nil,
// that app has no scheduler and a second app on db must finish the run.
func testSleepWakes(t *testing.T, da, db *postgres.Driver) {
	var after atomic.Int32
	nap := func(app string) *oke.Flow[echoIn, string] {
		return oke.NewFlow("n.nap", oke.Options{Durable: true},
			func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[string], error) {
				if err := oke.Sleep(ctx, "nap", 300*time.Millisecond); err != nil {
					return oke.Response[string]{}, err
				}
				after.Add(1)
				return oke.OK(app), nil
			})
	}
	poll := hourPoll
	if db != nil {
		poll = -1
	}
	a := startApp(t, oke.Config{Driver: da, PollInterval: poll}, func(app *oke.App) {
		app.Handle(oke.POST("/nap"), nap("A"))
	})
	finisher := "A"
	if db != nil {
		finisher = "B"
		startApp(t, oke.Config{Driver: db, PollInterval: hourPoll}, func(app *oke.App) {
			app.Handle(oke.POST("/nap"), nap("B"))
		})
		_, admin := server(t)
		listenerPID(t, admin, db.WakeChannel(), 0)
	}
	if w := post(t, a, "/nap", `{"n": 1}`); w.Code != http.StatusNoContent {
		t.Fatalf("POST /nap: %d %s, want 204 (parked)", w.Code, w.Body)
	}
	run := waitStatus(t, da, "n.nap", 1, driver.RunCompleted)
	if got := string(run.Result.Body); !strings.Contains(got, finisher) || after.Load() != 1 {
		t.Fatalf("run finished with %s after %d wake-ups, want it finished once by app %s", got, after.Load(), finisher)
	}
}

// startApp starts an app on cfg (quiet, no sweeps) with the bindings bind
// makes, and closes it when the test ends.
func startApp(t testing.TB, cfg oke.Config, bind func(*oke.App)) *oke.App {
	t.Helper()
	cfg.SweepInterval = -1
	app := oke.New(cfg)
	bind(app)
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := app.Close(ctx); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	return app
}

func post(t testing.TB, h http.Handler, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	return w
}

// waitStatus waits until flow has n runs, all with status, and returns the
// last one.
func waitStatus(t *testing.T, d *postgres.Driver, flow string, n int, status driver.RunStatus) driver.Run {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		runs, err := d.ListRuns(t.Context(), driver.RunFilter{Flow: flow}, 0)
		if err != nil {
			t.Fatal(err)
		}
		done := len(runs) == n
		for _, r := range runs {
			done = done && r.Status == status
		}
		if done {
			return runs[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, runs of %s: %+v; want %d, all %s", wait, flow, runs, n, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBacklogStartsWhenASlotFrees: with one slot (MaxConcurrentRuns 1) and
// an hourly poll, a due run left behind because the slot was taken starts
// when the slot frees, not at the next poll: nothing else would tell the
// scheduler (a run that completes sends no notification).
func TestBacklogStartsWhenASlotFrees(t *testing.T) {
	twoDrivers(t)
	da := newDriver(t)
	defer da.Close()
	db := sameSchema(t, da)
	started := make(chan int, 2)
	release := make(chan struct{})
	hold := func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[int], error) {
		started <- in.N
		<-release
		return oke.OK(in.N), nil
	}
	holdA := oke.NewFlow("n.hold", oke.Options{Durable: true}, hold)
	a := startApp(t, oke.Config{Driver: da, PollInterval: -1}, func(app *oke.App) {
		app.Handle(oke.Internal(), holdA)
		app.Handle(oke.POST("/start"), oke.NewFlow("n.start", oke.Options{Idempotency: oke.Off},
			func(ctx context.Context, in echoIn, fx *oke.Fx) (oke.Response[string], error) {
				id, err := oke.Run(ctx, fx, holdA, in)
				return oke.OK(id), err
			}))
	})
	for _, body := range []string{`{"n": 1}`, `{"n": 2}`} {
		if w := post(t, a, "/start", body); w.Code != 200 {
			t.Fatalf("POST /start: %d %s", w.Code, w.Body)
		}
	}
	defer close(release)
	// B starts with two runs due and one slot: it takes the older one.
	startApp(t, oke.Config{Driver: db, PollInterval: hourPoll, MaxConcurrentRuns: 1}, func(app *oke.App) {
		app.Handle(oke.Internal(), oke.NewFlow("n.hold", oke.Options{Durable: true}, hold))
	})
	next := func(what string) int {
		t.Helper()
		select {
		case n := <-started:
			return n
		case <-time.After(wait):
			t.Fatalf("no run started %s within %v (B polls hourly)", what, wait)
			return 0
		}
	}
	if n := next("when B started"); n != 1 {
		t.Fatalf("run %d started first, want 1 (the longest due)", n)
	}
	_, admin := server(t)
	listenerPID(t, admin, db.WakeChannel(), 0)
	release <- struct{}{} // the first run ends; its slot frees
	if n := next("once the slot freed"); n != 2 {
		t.Fatalf("run %d started second, want 2", n)
	}
}

// The listener's connection goes through the pool's connect hooks, like the
// pool's own connections (a hook may set credentials or session settings).
func TestListenerUsesThePoolsConnectHooks(t *testing.T) {
	url, admin := server(t)
	twoDrivers(t)
	base := newDriver(t)
	cfg, err := pgxpool.ParseConfig(pgtest.Charge(t, pgtest.DriverConns(testPool)).DSN(pgtest.WithPoolSize(url, testPool)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hooked := map[uint32]bool{}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		mu.Lock()
		hooked[c.PgConn().PID()] = true
		mu.Unlock()
		return nil
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := postgres.Open(t.Context(), "", postgres.WithPool(pool), postgres.WithSchema(base.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, stop := d.WatchDue()
	defer stop()
	pid := listenerPID(t, admin, d.WakeChannel(), 0)
	mu.Lock()
	defer mu.Unlock()
	if !hooked[uint32(pid)] {
		t.Fatalf("the listener's connection (pid %d) did not go through AfterConnect (hooked: %v)", pid, hooked)
	}
}
