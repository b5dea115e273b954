package oke

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke/internal/idem"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRetryAfterFollowsTheFlowsPace: the Retry-After of a 409
// IdempotencyInProgress is the flow's recent execution duration in whole
// seconds, at least 1 — a flow that takes no time says 1, not the lease —
// and never more than the lease's remaining time; before the flow has a
// duration, the lease's. The executions are timed on a fake clock that the
// flow moves forward, not by real sleeps.
func TestRetryAfterFollowsTheFlowsPace(t *testing.T) {
	const lease = 10 * time.Second
	for _, tc := range []struct {
		name     string
		takes    time.Duration // each execution, on the fake clock
		warm     bool          // one execution done before the 409
		min, max int           // Retry-After, in seconds
	}{
		{"fast", 0, true, 1, 1},
		{"a few ms", 3 * time.Millisecond, true, 1, 1},
		{"seven seconds", 6500 * time.Millisecond, true, 7, 7},
		{"longer than the lease", 100 * time.Second, true, 2, 10},
		{"no duration yet", 0, false, 2, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
			release, started := make(chan struct{}), make(chan struct{}, 1)
			app := New(Config{SweepInterval: -1, Lease: lease, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			app.paces.now = clock.Now
			app.Handle(POST("/work"), NewFlow("t.paced", Options{},
				func(ctx context.Context, in struct{ Hold bool }, fx *Fx) (Response[int], error) {
					fx.Raw(ctx, "write", func(context.Context) error { return nil })
					clock.Add(tc.takes)
					if in.Hold {
						started <- struct{}{}
						<-release
					}
					return Created(1, "/work/1"), nil
				}))
			if err := app.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			finish := func() { once.Do(func() { close(release) }) }
			t.Cleanup(func() {
				finish()
				app.Close(context.Background())
			})
			post := func(key, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/work", strings.NewReader(body))
				r.Header.Set("Idempotency-Key", key)
				w := httptest.NewRecorder()
				app.ServeHTTP(w, r)
				return w
			}
			if tc.warm {
				if w := post("paced-warm-up-00001", `{"Hold":false}`); w.Code != 201 {
					t.Fatalf("warm-up: %d %s", w.Code, w.Body)
				}
			}
			held := make(chan *httptest.ResponseRecorder)
			go func() { held <- post("paced-held-key-0001", `{"Hold":true}`) }()
			<-started
			w := post("paced-held-key-0001", `{"Hold":true}`)
			ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if w.Code != 409 || err != nil || ra < tc.min || ra > tc.max {
				t.Fatalf("409 of a flow that takes %v: %d, Retry-After %q; want in [%d, %d]",
					tc.takes, w.Code, w.Header().Get("Retry-After"), tc.min, tc.max)
			}
			finish()
			if w := <-held; w.Code != 201 {
				t.Fatalf("the held request: %d %s", w.Code, w.Body)
			}
		})
	}
}

// TestFlowPaceFollowsChange: the moving average starts at the first
// duration and moves a quarter of the way to each new one.
func TestFlowPaceFollowsChange(t *testing.T) {
	var p flowPace
	if _, ok := p.estimate(); ok {
		t.Fatal("an estimate before any duration")
	}
	p.observe(8 * time.Second)
	p.observe(4 * time.Second)
	if d, ok := p.estimate(); !ok || d != 7*time.Second {
		t.Fatalf("after 8 s and 4 s: %v, want 7s", d)
	}
}

// TestRetryAfterOfAClaimHeldInATransaction: a holder whose claim is held by
// its transaction has no lease to count down (the decision says 1 s): the
// flow's pace still decides, bounded by the lease; 1 s without a pace.
func TestRetryAfterOfAClaimHeldInATransaction(t *testing.T) {
	app := New(Config{SweepInterval: -1, Lease: 10 * time.Second})
	f := &flow{name: "t.intx"}
	busy := idem.Decision{Outcome: idem.InProgress, RetryAfter: time.Second, HeldInTx: true}
	if got := app.retryAfter(f, busy); got != time.Second {
		t.Fatalf("no pace yet: %v, want 1s", got)
	}
	app.paces.of(f.name).observe(4200 * time.Millisecond)
	if got := app.retryAfter(f, busy); got != 5*time.Second {
		t.Fatalf("a 4.2 s pace: %v, want 5s", got)
	}
	app.paces.of(f.name).observe(time.Hour)
	if got := app.retryAfter(f, busy); got != 10*time.Second {
		t.Fatalf("a pace past the lease: %v, want the lease, 10s", got)
	}
	leased := idem.Decision{Outcome: idem.InProgress, RetryAfter: 3 * time.Second}
	if got := app.retryAfter(f, leased); got != 3*time.Second {
		t.Fatalf("a leased holder with 3 s left: %v, want 3s", got)
	}
}
