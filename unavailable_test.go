package oke_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// flakyDriver fails chosen primitives with driver.ErrUnavailable.
type flakyDriver struct {
	driver.Driver
	claim, complete atomic.Bool
}

var errDown = fmt.Errorf("test: store down: %w", driver.ErrUnavailable)

func (d *flakyDriver) Claim(ctx context.Context, r driver.ClaimRequest) (driver.ClaimResult, error) {
	if d.claim.Load() {
		return driver.ClaimResult{}, errDown
	}
	return d.Driver.Claim(ctx, r)
}

func (d *flakyDriver) Complete(ctx context.Context, k driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if d.complete.Load() {
		return errDown
	}
	return d.Driver.Complete(ctx, k, owner, resp, ttl)
}

// TestHonest503s: DESIGN.md 6.1 "Honest 503s". StoreUnavailable ("the
// request was not run") only when the flow's function did not start;
// OutcomeUnknown when it started and its outcome could not be stored;
// Unavailable when it started, changed nothing, and could not reach what it
// needed. Every 503 is counted by code, and a keyed one as its outcome.
func TestHonest503s(t *testing.T) {
	d := &flakyDriver{Driver: memory.New()}
	var runs atomic.Int64
	app := newApp(t, oke.Config{Driver: d}, func(app *oke.App) {
		app.Handle(oke.POST("/write"), oke.NewFlow("h.write", oke.Options{},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				runs.Add(1)
				return oke.Created(in.Amount, ""), fx.Raw(ctx, "write", func(context.Context) error { return nil })
			}))
		app.Handle(oke.POST("/down"), oke.NewFlow("h.down", oke.Options{},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				runs.Add(1)
				return oke.Response[int64]{}, fmt.Errorf("reach the database: %w", driver.ErrUnavailable)
			}))
	})
	for _, tc := range []struct {
		name         string
		claim, compl bool
		path         string
		key          bool
		code         string
		ran          int64
	}{
		{"the claim fails: not run", true, false, "/write", true, "StoreUnavailable", 0},
		{"the response cannot be stored: outcome unknown", false, true, "/write", true, "OutcomeUnknown", 1},
		{"the flow cannot reach its database before any effect: unavailable", false, false, "/down", true, "Unavailable", 1},
		{"the same without a key", false, false, "/down", false, "Unavailable", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.claim.Store(tc.claim)
			d.complete.Store(tc.compl)
			defer d.claim.Store(false)
			defer d.complete.Store(false)
			before := runs.Load()
			hdr := []string{}
			if tc.key {
				hdr = []string{"Idempotency-Key", "honest-503-key-" + strings.ReplaceAll(tc.name, " ", "-")}
			}
			w := do(app, "POST", tc.path, `{"amount":1}`, hdr...)
			if w.Code != 503 || !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`) || w.Header().Get("Retry-After") == "" {
				t.Fatalf("%d %v %s, want 503 %s with Retry-After", w.Code, w.Header(), w.Body, tc.code)
			}
			if got := runs.Load() - before; got != tc.ran {
				t.Fatalf("the function ran %d times, want %d", got, tc.ran)
			}
		})
	}
	metrics := do(app.MetricsHandler(), "GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`oke_unavailable_total{code="StoreUnavailable",flow="h.write"} 1`,
		`oke_unavailable_total{code="OutcomeUnknown",flow="h.write"} 1`,
		`oke_unavailable_total{code="Unavailable",flow="h.down"} 2`,
		`oke_idempotency_outcomes_total{flow="h.write",outcome="unavailable"} 1`,
		`oke_idempotency_outcomes_total{flow="h.write",outcome="unknown"} 1`,
		`oke_idempotency_outcomes_total{flow="h.down",outcome="unavailable"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestOutcomeUnknownIsAnError(t *testing.T) {
	cause := errors.New("lost")
	if err := oke.ErrOutcomeUnknown.WithCause(cause); !errors.Is(err, cause) || !errors.Is(err, oke.ErrOutcomeUnknown) || errors.Is(err, oke.ErrStoreUnavailable) {
		t.Fatalf("%v", err)
	}
}
