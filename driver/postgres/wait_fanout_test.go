package postgres_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

// statementLog records the statements a pool sends, by their SQL.
type statementLog struct {
	mu   sync.Mutex
	sqls []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.sqls = append(l.sqls, strings.Join(strings.Fields(data.SQL), " "))
	l.mu.Unlock()
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements since the last take.
func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sqls
	l.sqls = nil
	return s
}

// tracedSameSchema opens a second driver on d's schema whose pool (and
// listener, which connects with the pool's settings) logs its statements.
func tracedSameSchema(t *testing.T, d *postgres.Driver) (*postgres.Driver, *statementLog) {
	t.Helper()
	url, _ := server(t)
	cfg, err := pgxpool.ParseConfig(pgtest.Charge(t, pgtest.DriverConns(testPool)).DSN(url))
	if err != nil {
		t.Fatal(err)
	}
	log := &statementLog{}
	cfg.MaxConns, cfg.MinConns = testPool, 0
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	td, err := postgres.Open(t.Context(), "", postgres.WithPool(pool), postgres.WithSchema(d.Schema()))
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		td.Close()
		pool.Close()
	})
	return td, log
}

// TestPreferWaitersOfOneKeyShareOneWatch: W requests held by Prefer: wait
// on instance B for one key whose first request runs on instance A cost B
// a constant number of statements while they wait — one announcement of
// the wait, one read of the row before, one after A's notification — not
// some per request; A sends one completion notice, and every one of the W
// is answered A's stored response. Polling is off (WaitPollInterval < 0),
// so that the count is of what the waits do, not of how long they last.
func TestPreferWaitersOfOneKeyShareOneWatch(t *testing.T) {
	const waiters = 24
	pgtest.Need(t, 2*pgtest.DriverConns(testPool)+1)
	da := newDriver(t)
	db, log := tracedSameSchema(t, da)
	tap := tapWaits(t, da)
	p := newPreferWaitPair(t, da, db, false, oke.Config{WaitPollInterval: -1})
	until(t, "both instances hear notifications", func() bool { return da.Hearing() && db.Hearing() })

	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- p.post(p.a) }()
	<-p.started
	log.take() // B's listener's LISTENs
	held := make(chan *httptest.ResponseRecorder, waiters)
	for i := 0; i < waiters; i++ {
		go func() { held <- p.post(p.b, "Prefer", "wait=60") }()
	}
	until(t, fmt.Sprintf("B holds %d requests", waiters), func() bool { return waitingOn(t, p.b) == waiters })
	until(t, "A hears B's wait", func() bool { return postgres.WaitsHeard(da) == 1 })
	close(p.release)
	f := <-first
	for i := 0; i < waiters; i++ {
		w := <-held
		if f.Code != 201 || w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != f.Body.String() ||
			w.Header().Get("Preference-Applied") != "wait=60" {
			t.Fatalf("A: %d %s; B held %d: %d %v %s", f.Code, f.Body, i, w.Code, w.Header(), w.Body)
		}
	}
	var claims int
	var waits []string
	for _, sql := range log.take() {
		if strings.Contains(sql, "."+postgres.ClaimFunction+"(") {
			claims++ // each request's own claim, which found the key in progress
			continue
		}
		waits = append(waits, sql)
	}
	if claims != waiters {
		t.Errorf("B made %d claims, want one per request (%d)", claims, waiters)
	}
	// One announcement, one read after it, one read when notified; a
	// listener that reconnected would announce and read once more.
	t.Logf("%d statements while waiting: %q", len(waits), waits)
	if len(waits) > 5 {
		t.Fatalf("B's %d held requests sent %d statements while waiting, want a few for all of them:\n%s",
			waiters, len(waits), strings.Join(waits, "\n"))
	}
	if got := tap.drain(t); countPrefix(got, "w:") != 1 || countPrefix(got, "d:") != 1 {
		t.Fatalf("sent on %s: %q, want one wait and one completion", tap.channel, got)
	}
	if n := p.ran.Load(); n != 1 {
		t.Fatalf("the flow ran %d times, want once", n)
	}
}

// TestPreferWaitSafetyNetReadsAllKeysAtOnce: requests held on instance B
// for K keys whose first requests run on instance A, which sends no
// notifications (it does not hear waiters): B finds the answers by polling,
// and after each key's first few reads (a completion may race the
// announcement of its wait) one statement reads the rows of all K keys
// (driver.RowsGetter), however long they wait — not one per key, nor one
// per request. Every request gets its key's stored answer.
func TestPreferWaitSafetyNetReadsAllKeysAtOnce(t *testing.T) {
	const keys, perKey = 6, 2
	pgtest.Need(t, 2*pgtest.DriverConns(testPool)+1)
	da := newDriver(t)
	db, log := tracedSameSchema(t, da)
	release := make(chan struct{})
	started := make(chan struct{}, keys)
	newApp := func(cfg oke.Config) *oke.App {
		app := oke.New(cfg)
		app.Handle(oke.POST("/slow"), oke.NewFlow("pw.many", oke.Options{},
			func(ctx context.Context, in struct{ N int }, fx *oke.Fx) (oke.Response[int], error) {
				fx.Raw(ctx, "write", func(context.Context) error { return nil })
				started <- struct{}{}
				<-release
				return oke.Created(in.N, fmt.Sprintf("/slow/%d", in.N)), nil
			}))
		if err := app.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { app.Close(context.Background()) })
		return app
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := newApp(oke.Config{Driver: onlyDriver{da}, SweepInterval: -1, PollInterval: -1, Logger: quiet})
	const poll = 40 * time.Millisecond // reads at 20 ms, 40 ms, then the sweep's
	b := newApp(oke.Config{Driver: db, SweepInterval: -1, PollInterval: -1, Logger: quiet, WaitPollInterval: poll})
	var once sync.Once
	finish := func() { once.Do(func() { close(release) }) }
	t.Cleanup(finish) // before the apps close: their requests end
	until(t, "B hears notifications", db.Hearing)
	post := func(app *oke.App, n int, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader(fmt.Sprintf(`{"N":%d}`, n)))
		r.Header.Set("Idempotency-Key", fmt.Sprintf("safety-net-key-%04d", n))
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	firsts := make([]chan *httptest.ResponseRecorder, keys)
	for n := range keys {
		firsts[n] = make(chan *httptest.ResponseRecorder, 1)
		go func() { firsts[n] <- post(a, n) }()
		select {
		case <-started:
		case w := <-firsts[n]:
			t.Fatalf("A's request %d: %d %s", n, w.Code, w.Body)
		}
	}
	log.take()
	held := make(chan *httptest.ResponseRecorder, keys*perKey)
	for n := range keys * perKey {
		go func() { held <- post(b, n%keys, "Prefer", "wait=60") }()
	}
	until(t, "B holds every request", func() bool { return waitingOn(t, b) == keys*perKey })
	var sqls []string
	sweeps := func() int {
		sqls = append(sqls, log.take()...)
		n := 0
		for _, s := range sqls {
			if strings.Contains(s, "unnest(") {
				n++
			}
		}
		return n
	}
	until(t, "B sweeps the waited keys a few times", func() bool { return sweeps() >= 4 })
	finish()
	answers := map[string]string{}
	for n := range keys {
		f := <-firsts[n]
		if f.Code != 201 {
			t.Fatalf("A's request %d: %d %s", n, f.Code, f.Body)
		}
		answers[f.Header().Get("Location")] = f.Body.String()
	}
	for range keys * perKey {
		w := <-held
		if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || answers[w.Header().Get("Location")] != w.Body.String() {
			t.Fatalf("a held request: %d %v %s", w.Code, w.Header(), w.Body)
		}
	}
	sweeps()
	single := 0
	for _, s := range sqls {
		if strings.Contains(s, "FROM") && strings.Contains(s, "oke_idempotency WHERE tenant = $1") {
			single++
		}
	}
	// Per key: the read after the announcement and the two early polls;
	// a listener that reconnected would add one more read per key.
	if single > 4*keys {
		t.Fatalf("B read single rows %d times for %d keys (%d requests), want at most %d: the rest is the sweep's:\n%s",
			single, keys, keys*perKey, 4*keys, strings.Join(sqls, "\n"))
	}
	t.Logf("%d single-row reads, %d sweeps", single, sweeps())
}
