package oke_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// The backoff after failed attempt n is InitialBackoff × Multiplier^(n-1),
// capped by MaxBackoff, moved by ±Jitter according to the draw u (0.5 is
// the nominal wait); zero fields take DefaultRetryPolicy's values.
func TestRetryBackoffGrowsAndIsCapped(t *testing.T) {
	ms := time.Millisecond
	p := oke.RetryPolicy{InitialBackoff: 100 * ms, Multiplier: 2, MaxBackoff: time.Second, Jitter: 0.2}
	for _, c := range []struct {
		name    string
		p       oke.RetryPolicy
		attempt int
		u       float64
		want    time.Duration
	}{
		{"first wait is InitialBackoff", p, 1, 0.5, 100 * ms},
		{"grows by Multiplier", p, 2, 0.5, 200 * ms},
		{"grows again", p, 4, 0.5, 800 * ms},
		{"capped by MaxBackoff", p, 5, 0.5, time.Second},
		{"stays capped", p, 60, 0.5, time.Second},
		{"shortest draw takes Jitter off", p, 2, 0, 160 * ms},
		{"longest draw adds Jitter", p, 2, 1, 240 * ms},
		{"jitter applies after the cap", p, 9, 0, 800 * ms},
		{"negative Jitter is none", oke.RetryPolicy{InitialBackoff: 100 * ms, Jitter: -1}, 1, 0, 100 * ms},
		{"zero policy is the default's", oke.RetryPolicy{Jitter: -1}, 1, 0, 200 * ms},
		{"default grows ×2", oke.RetryPolicy{Jitter: -1}, 2, 0, 400 * ms},
		{"a Multiplier below 1 does not shrink", oke.RetryPolicy{InitialBackoff: 100 * ms, Multiplier: 0.5, Jitter: -1}, 3, 0, 100 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Backoff(c.attempt, c.u); got != c.want {
				t.Errorf("Backoff(%d, %v) = %v, want %v", c.attempt, c.u, got, c.want)
			}
		})
	}
}

var errBadInput = errors.New("the provider refused the request")

// TestStepRetry: a step's plain error is retried by its policy (here in
// process, with 1 ms waits), and the attempts are journaled; the last
// allowed attempt's error or a permanent one fails the run with it; a
// declared failure is saved at once and never retried.
func TestStepRetry(t *testing.T) {
	fast := oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Jitter: -1,
		Permanent: func(err error) bool { return errors.Is(err, errBadInput) }}
	for _, c := range []struct {
		name     string
		flow     *oke.RetryPolicy // the flow's policy
		step     []oke.StepOption // the step's options
		fail     func(n int64, fx *oke.Fx) error
		code     int
		ran      int64
		status   driver.RunStatus
		attempts int    // the saved step's attempts (0: not saved)
		errHas   string // in the run's Error
	}{
		{name: "plain error retried then succeeds", flow: &fast,
			fail: func(n int64, _ *oke.Fx) error {
				if n < 3 {
					return fmt.Errorf("timeout %d", n)
				}
				return nil
			},
			code: 201, ran: 3, status: driver.RunCompleted, attempts: 3},
		{name: "exhausted attempts fail the run with the last error", flow: &fast,
			fail: func(n int64, _ *oke.Fx) error { return fmt.Errorf("timeout %d", n) },
			code: 500, ran: 3, status: driver.RunFailed, errHas: `step "flaky" failed after 3 attempts; the last: timeout 3`},
		{name: "permanent error fails at once", flow: &fast,
			fail: func(n int64, _ *oke.Fx) error { return fmt.Errorf("charge: %w", errBadInput) },
			code: 500, ran: 1, status: driver.RunFailed, errHas: "permanent error (attempt 1)"},
		{name: "declared failure is saved and never retried", flow: &fast,
			fail: func(n int64, fx *oke.Fx) error { return fx.Fail(402, "PaymentDeclined", "declined") },
			code: 402, ran: 1, status: driver.RunFailed, attempts: 1},
		{name: "the step's policy wins over the flow's", flow: &fast,
			step: []oke.StepOption{oke.Retry(oke.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond})},
			fail: func(n int64, _ *oke.Fx) error { return fmt.Errorf("timeout %d", n) },
			code: 500, ran: 2, status: driver.RunFailed, errHas: "after 2 attempts"},
		{name: "NoRetry fails at the first error", flow: &oke.NoRetry,
			fail: func(n int64, _ *oke.Fx) error { return fmt.Errorf("timeout %d", n) },
			code: 500, ran: 1, status: driver.RunFailed, errHas: `step "flaky" failed at its only attempt: timeout 1`},
		{name: "the default policy retries a blip", flow: nil,
			fail: func(n int64, _ *oke.Fx) error {
				if n < 2 {
					return errors.New("connection reset")
				}
				return nil
			},
			code: 201, ran: 2, status: driver.RunCompleted, attempts: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ran atomic.Int64
			app := newApp(t, oke.Config{PollInterval: -1}, func(app *oke.App) {
				app.Handle(oke.POST("/f"), oke.NewFlow("r.flaky", oke.Options{Durable: true, Retry: c.flow},
					func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int64], error) {
						n, err := oke.Step(ctx, "flaky", func(ctx context.Context) (int64, error) {
							n := ran.Add(1)
							return n, c.fail(n, fx)
						}, c.step...)
						if err != nil {
							return oke.Response[int64]{}, err
						}
						return oke.Created(n, ""), nil
					}))
			})
			w := do(app, "POST", "/f", `{}`, "Idempotency-Key", "retry-test-key-000001")
			if w.Code != c.code {
				t.Fatalf("status %d, want %d; body %s", w.Code, c.code, w.Body)
			}
			if n := ran.Load(); n != c.ran {
				t.Errorf("the step's function ran %d times, want %d", n, c.ran)
			}
			run, steps := runOfFlow(t, app, "r.flaky")
			if run.Status != c.status || !strings.Contains(run.Error, c.errHas) {
				t.Errorf("run: status %v, error %q; want %v, containing %q", run.Status, run.Error, c.status, c.errHas)
			}
			switch {
			case c.attempts == 0 && len(steps) != 0:
				t.Errorf("steps %+v, want none saved", steps)
			case c.attempts > 0 && (len(steps) != 1 || steps[0].Attempts != c.attempts):
				t.Errorf("steps %+v, want step flaky saved with %d attempts", steps, c.attempts)
			}
		})
	}
}

// runOfFlow returns the one run of flow and its steps.
func runOfFlow(t *testing.T, app *oke.App, flow string) (driver.Run, []driver.Step) {
	t.Helper()
	runs, err := app.Journal().ListRuns(context.Background(), driver.RunFilter{Flow: flow}, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %+v, %v; want one", flow, runs, err)
	}
	run, steps, err := app.Journal().GetRun(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return run, steps
}

// Attempts parked in the journal (every wait longer than RetryInline) are
// counted across pick-ups: the run fails once the step's last allowed
// attempt fails, however many pick-ups it took, and the request that
// started it got 503 OutcomeUnknown with Retry-After while it waited.
func TestStepRetriesParkedAcrossPickUpsExhaust(t *testing.T) {
	var ran atomic.Int64
	policy := oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Jitter: -1}
	app := newApp(t, oke.Config{RetryInline: -1, PollInterval: 10 * time.Millisecond}, func(app *oke.App) {
		app.Handle(oke.POST("/f"), oke.NewFlow("r.parked", oke.Options{Durable: true, Retry: &policy},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
				_, err := oke.Step(ctx, "flaky", func(ctx context.Context) (int, error) {
					return 0, fmt.Errorf("timeout %d", ran.Add(1))
				})
				if err != nil {
					return oke.Response[int]{}, err
				}
				return oke.OK(1), nil
			}))
	})
	w := do(app, "POST", "/f", `{}`)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "OutcomeUnknown") || w.Header().Get("Retry-After") == "" {
		t.Fatalf("first answer: %d %s (Retry-After %q), want 503 OutcomeUnknown with Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		run, _ := runOfFlow(t, app, "r.parked")
		if run.Status.Finished() {
			if run.Status != driver.RunFailed || !strings.Contains(run.Error, "after 3 attempts; the last: timeout 3") {
				t.Fatalf("run ended %v with %q, want failed after 3 attempts with the last error", run.Status, run.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %v after 30 s (error %q)", run.Status, run.Error)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ran.Load(); n != 3 {
		t.Errorf("the step ran %d times, want 3", n)
	}
}

// While a step waits for a parked retry, the request that started the run
// has its 503 OutcomeUnknown; a retry with the same key is 409 while the
// key's row is held, then (the row lapsed, no scheduler here) resumes the
// run itself, runs the step's second attempt and answers the result, which
// later retries replay.
func TestRetryWithTheKeyAfterAParkedStepGetsTheResult(t *testing.T) {
	var ran atomic.Int64
	policy := oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Jitter: -1}
	app := newApp(t, oke.Config{RetryInline: -1, PollInterval: -1, Lease: 200 * time.Millisecond}, func(app *oke.App) {
		app.Handle(oke.POST("/f"), oke.NewFlow("r.key", oke.Options{Durable: true, Retry: &policy},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int64], error) {
				n, err := oke.Step(ctx, "flaky", func(ctx context.Context) (int64, error) {
					if n := ran.Add(1); n > 1 {
						return n, nil
					}
					return 0, errors.New("provider down")
				})
				if err != nil {
					return oke.Response[int64]{}, err
				}
				return oke.Created(n, ""), nil
			}))
	})
	const key = "retry-key-parked-000001"
	if w := do(app, "POST", "/f", `{}`, "Idempotency-Key", key); w.Code != 503 || !strings.Contains(w.Body.String(), "OutcomeUnknown") {
		t.Fatalf("first: %d %s, want 503 OutcomeUnknown", w.Code, w.Body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := do(app, "POST", "/f", `{}`, "Idempotency-Key", key)
		if w.Code == 201 {
			if strings.TrimSpace(w.Body.String()) != "2" {
				t.Fatalf("retry with the key: %s, want the second attempt's result 2", w.Body)
			}
			break
		}
		if w.Code != 409 {
			t.Fatalf("retry with the key while the run waits: %d %s, want 409 (or 201 once it ran)", w.Code, w.Body)
		}
		if time.Now().After(deadline) {
			t.Fatal("the retry with the key never got the result")
		}
		time.Sleep(20 * time.Millisecond)
	}
	w := do(app, "POST", "/f", `{}`, "Idempotency-Key", key)
	if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a later retry: %d (replayed %q), want the stored 201 replayed", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the step ran %d times, want 2", n)
	}
	_, steps := runOfFlow(t, app, "r.key")
	if len(steps) != 1 || steps[0].Attempts != 2 {
		t.Errorf("steps %+v, want flaky saved at attempt 2", steps)
	}
}
