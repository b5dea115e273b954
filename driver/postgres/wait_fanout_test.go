package postgres_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
		if strings.Contains(sql, ".oke_claim(") {
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
