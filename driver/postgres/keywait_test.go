package postgres_test

import (
	"context"
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

// noticeTap is a session of the test's own that LISTENs on a driver's
// WaitChannel, to see what the instances send on it.
type noticeTap struct {
	conn    *pgx.Conn
	channel string
	seq     int
}

// tapWaits LISTENs on d's WaitChannel (the test declared the connection
// with pgtest.Need).
func tapWaits(t *testing.T, d *postgres.Driver) *noticeTap {
	t.Helper()
	url, _ := server(t)
	c := pgtest.Charge(t, 1)
	conn, err := pgx.Connect(t.Context(), c.DSN(url))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tap := &noticeTap{conn: conn, channel: d.WaitChannel()}
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{tap.channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return tap
}

// drain returns the payloads sent on the channel since the last drain, in
// commit order: it sends a marker of its own and reads up to it, so it
// waits for nothing that will not come (notifications of different
// transactions are delivered in the order they committed).
func (n *noticeTap) drain(t *testing.T) []string {
	t.Helper()
	n.seq++
	mark := fmt.Sprintf("mark:%d", n.seq)
	if _, err := n.conn.Exec(t.Context(), "SELECT pg_notify($1, $2)", n.channel, mark); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		m, err := n.conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read notifications up to %s: %v", mark, err)
		}
		if m.Payload == mark {
			return got
		}
		got = append(got, m.Payload)
	}
}

// countPrefix is how many of payloads start with prefix.
func countPrefix(payloads []string, prefix string) int {
	n := 0
	for _, p := range payloads {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

// until waits for cond, failing the test with what after wait.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(wait); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, wait)
		}
	}
}

// TestCompletionNotifiesOnlyWaitedKeys: a driver that hears waiters sends
// nothing when it completes a key nobody waits for — in a statement of its
// own or in the flow's transaction — nor when a completion of a waited key
// is refused; it sends one "d:" with the completion of a key another
// instance announced a wait for, and that instance's waiter is woken.
func TestCompletionNotifiesOnlyWaitedKeys(t *testing.T) {
	pgtest.Need(t, 2*pgtest.DriverConns(testPool)+1)
	a := newDriver(t)
	b := sameSchema(t, a)
	tap := tapWaits(t, a)
	defer a.HearWaiters()()
	defer b.HearWaiters()()
	until(t, "both listeners LISTEN", func() bool { return a.Hearing() && b.Hearing() })
	ctx := t.Context()
	resp := driver.Response{Status: 201, Body: []byte(`{}`)}
	claim := func(k driver.Key, owner string) {
		t.Helper()
		r, err := a.Claim(ctx, driver.ClaimRequest{Key: k, Fingerprint: "fp", Owner: owner, Lease: time.Minute, TTL: time.Hour})
		if err != nil || !r.Claimed {
			t.Fatalf("claim %v: %+v, %v", k, r, err)
		}
	}
	key := func(s string) driver.Key { return driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: s} }

	claim(key("alone"), "o1")
	if err := a.Complete(ctx, key("alone"), "o1", resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	claim(key("alone-tx"), "o2")
	conn, err := a.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Begin(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := a.CommitComplete(ctx, conn, key("alone-tx"), "o2", resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := tap.drain(t); len(got) != 0 {
		t.Fatalf("completions nobody waits for sent %q, want nothing", got)
	}

	claim(key("waited"), "o3")
	c, stop := b.WaitFor(ctx, key("waited"))
	defer stop()
	until(t, "a hears b's wait", func() bool { return postgres.WaitsHeard(a) == 1 })
	if err := a.Complete(ctx, key("waited"), "someone else", resp, time.Hour); err == nil {
		t.Fatal("a completion by another owner was not refused")
	}
	if got := tap.drain(t); countPrefix(got, "w:") != 1 || countPrefix(got, "d:") != 0 {
		t.Fatalf("sent %q, want b's one wait and no completion (the one tried was refused)", got)
	}
	select { // the value WaitFor's listener may have left when it came up
	case <-c:
	default:
	}
	if err := a.Complete(ctx, key("waited"), "o3", resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	receive(t, c, "after another instance completed the waited key")
	if got := tap.drain(t); len(got) != 1 || countPrefix(got, "d:") != 1 {
		t.Fatalf("sent %q, want one completion", got)
	}
	until(t, "both forget the completed wait", func() bool { return postgres.WaitsHeard(a) == 0 && postgres.WaitsHeard(b) == 0 })
}

// preferWaitPair is two apps on one schema (two instances) with a slow flow
// on /slow; release lets its first run finish.
type preferWaitPair struct {
	a, b    *oke.App
	release chan struct{}
	started chan struct{}
	ran     atomic.Int32
}

func newPreferWaitPair(t *testing.T, da, db driver.Driver, inTx bool, cb oke.Config) *preferWaitPair {
	t.Helper()
	p := &preferWaitPair{release: make(chan struct{}), started: make(chan struct{})}
	newApp := func(cfg oke.Config) *oke.App {
		app := oke.New(cfg)
		app.Handle(oke.POST("/slow"), oke.NewFlow("pw.slow", oke.Options{},
			func(ctx context.Context, in struct{ N int }, fx *oke.Fx) (oke.Response[int], error) {
				p.ran.Add(1)
				if inTx {
					tx, err := fx.Tx(ctx)
					if err != nil {
						return oke.Response[int]{}, err
					}
					if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
						return oke.Response[int]{}, err
					}
				} else {
					fx.Raw(ctx, "write", func(context.Context) error { return nil })
				}
				close(p.started)
				<-p.release
				return oke.Created(in.N, "/slow/1"), nil
			}))
		if err := app.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { app.Close(context.Background()) })
		return app
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p.a = newApp(oke.Config{Driver: da, SweepInterval: -1, PollInterval: -1, Logger: quiet})
	cb.Driver, cb.SweepInterval, cb.PollInterval, cb.Logger = db, -1, -1, quiet
	p.b = newApp(cb)
	return p
}

func (p *preferWaitPair) post(app *oke.App, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader(`{"N":7}`))
	r.Header.Set("Idempotency-Key", "prefer-wait-notify-1")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	app.ServeHTTP(w, r)
	return w
}

// run sends the first request to A and a waiting one to B; once ready
// says B may be answered, A's flow finishes. It checks that B got A's
// stored answer after waiting.
func (p *preferWaitPair) run(t *testing.T, ready func()) {
	t.Helper()
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- p.post(p.a) }()
	<-p.started
	if w := p.post(p.b); w.Code != http.StatusConflict {
		t.Fatalf("B without Prefer: wait: %d %s, want 409", w.Code, w.Body)
	}
	held := make(chan *httptest.ResponseRecorder)
	go func() { held <- p.post(p.b, "Prefer", "wait=30") }()
	until(t, "B holds the request", func() bool { return waitingOn(t, p.b) == 1 })
	ready()
	close(p.release)
	f, w := <-first, <-held
	if f.Code != 201 || w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != f.Body.String() ||
		w.Header().Get("Preference-Applied") != "wait=30" {
		t.Fatalf("A: %d %s; B held: %d %v %s", f.Code, f.Body, w.Code, w.Header(), w.Body)
	}
	if n := p.ran.Load(); n != 1 {
		t.Fatalf("the flow ran %d times, want once", n)
	}
}

// wakeups is app's oke_idempotency_wait_wakeups_total for cause by,
// summed over flows.
// waitReads is app's oke_idempotency_wait_reads_total, over every flow.
func waitReads(t *testing.T, app *oke.App) float64 {
	t.Helper()
	mfs, err := app.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "oke_idempotency_wait_reads_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func wakeups(t *testing.T, app *oke.App, by string) float64 {
	t.Helper()
	mfs, err := app.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "oke_idempotency_wait_wakeups_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "by" && l.GetValue() == by {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestPreferWaitWokenByNotification: B holds a request whose key's first
// request runs on A, and never polls (WaitPollInterval < 0): only A's
// notification of the completion can wake it, and it answers A's stored
// response. A sends exactly one completion notice. Both with the
// completion in a statement of its own and in the flow's transaction.
func TestPreferWaitWokenByNotification(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		t.Run(fmt.Sprintf("inTx=%v", inTx), func(t *testing.T) {
			pgtest.Need(t, 2*pgtest.DriverConns(testPool)+1)
			da := newDriver(t)
			db := sameSchema(t, da)
			tap := tapWaits(t, da)
			p := newPreferWaitPair(t, da, db, inTx, oke.Config{WaitPollInterval: -1})
			until(t, "both instances hear notifications", func() bool { return da.Hearing() && db.Hearing() })
			p.run(t, func() {
				until(t, "A hears B's wait", func() bool { return postgres.WaitsHeard(da) == 1 })
				// B has read the row once and waits: a first read that a
				// loaded machine delayed past A's end would answer B
				// without the notification this test is about.
				until(t, "B read the row", func() bool { return waitReads(t, p.b) >= 1 })
			})
			if n := wakeups(t, p.b, "notify"); n < 1 {
				t.Fatalf("B woke %v times by notification, want at least once", n)
			}
			if n := wakeups(t, p.b, "poll"); n != 0 {
				t.Fatalf("B polled %v times with polling off", n)
			}
			if got := tap.drain(t); countPrefix(got, "w:") != 1 || countPrefix(got, "d:") != 1 {
				t.Fatalf("sent on %s: %q, want one wait and one completion", tap.channel, got)
			}
		})
	}
}

// onlyDriver hides every optional interface of the driver it holds: an
// instance on it does not hear waiters, as one whose listener cannot
// LISTEN (a pooler in transaction mode) or an older version.
type onlyDriver struct{ driver.Driver }

// TestPreferWaitPollsWhenNotNotified: A does not hear waiters, so its
// completion sends no notice (the wait announced by B is lost on it); B,
// polling as by default, still answers A's stored response, woken by its
// poll and never by a notification.
func TestPreferWaitPollsWhenNotNotified(t *testing.T) {
	pgtest.Need(t, 2*pgtest.DriverConns(testPool)+1)
	da := newDriver(t)
	db := sameSchema(t, da)
	tap := tapWaits(t, da)
	p := newPreferWaitPair(t, onlyDriver{da}, db, false, oke.Config{})
	until(t, "B hears notifications", db.Hearing)
	p.run(t, func() {
		until(t, "B announced its wait", func() bool { return postgres.WaitsHeard(db) == 1 })
		// B has read the row and polls while A still runs:
		// so the completion it then learns of comes by a poll, not by a
		// first read that a loaded machine delayed past A's end.
		until(t, "B polls", func() bool { return wakeups(t, p.b, "poll") >= 1 })
	})
	polled := wakeups(t, p.b, "poll")
	if n := wakeups(t, p.b, "notify") + wakeups(t, p.b, "local"); n != 0 {
		t.Fatalf("B woke %v times by notification or locally (polled %v), from an instance that sends no notifications", n, polled)
	}
	if got := tap.drain(t); countPrefix(got, "w:") != 1 || countPrefix(got, "d:") != 0 {
		t.Fatalf("sent on %s: %q, want B's wait and no completion", tap.channel, got)
	}
}

// TestWaitForBeforeTheListenerIsUpIsAnnouncedOnceItIs: a wait that begins
// while its driver's listener is not LISTENing yet is announced by the
// listener once it is, and its waiter is told to read the row again.
func TestWaitForBeforeTheListenerIsUpIsAnnouncedOnceItIs(t *testing.T) {
	twoDrivers(t)
	a := newDriver(t)
	b := sameSchema(t, a)
	defer a.HearWaiters()()
	until(t, "a LISTENs", a.Hearing)
	if b.Hearing() {
		t.Fatal("b hears with no listener started")
	}
	c, stop := b.WaitFor(t.Context(), driver.Key{Tenant: "t", Principal: "p", Flow: "f", Key: "early"})
	defer stop()
	receive(t, c, "once b's listener LISTENs")
	until(t, "a hears b's wait", func() bool { return postgres.WaitsHeard(a) == 1 })
}
