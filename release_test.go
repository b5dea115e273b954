package oke_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// finishSpy is a memory driver that records, for each FinishRun, the
// status and how long its context had left when the driver was called.
type finishSpy struct {
	*memory.Driver
	mu   sync.Mutex
	left map[driver.RunStatus]time.Duration
}

func (d *finishSpy) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	if dl, ok := ctx.Deadline(); ok {
		d.mu.Lock()
		d.left[f.Status] = time.Until(dl)
		d.mu.Unlock()
	}
	return d.Driver.FinishRun(ctx, id, owner, f)
}

// TestReleaseOfARunIsBoundedShort: a run handed back before it is done (a
// step's retry parks it) is released with at most two seconds of the
// request's time, not the whole StoreTimeout, since a failed release costs
// nothing (the run's lease lapses); a run that ends stores its end with
// the whole StoreTimeout.
func TestReleaseOfARunIsBoundedShort(t *testing.T) {
	d := &finishSpy{Driver: memory.New(), left: map[driver.RunStatus]time.Duration{}}
	fail := true
	flow := oke.NewFlow("t.release", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
			v, err := oke.Step(ctx, "call", func(ctx context.Context) (string, error) {
				if fail {
					return "", errors.New("provider: 503")
				}
				return "ok", nil
			}, oke.Retry(oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Minute}))
			if err != nil {
				return oke.Response[string]{}, err
			}
			return oke.Created(v, ""), nil
		})
	app := oke.New(oke.Config{Driver: d, StoreTimeout: 30 * time.Second, PollInterval: -1, SweepInterval: -1})
	defer app.Close(context.Background())
	app.Handle(oke.POST("/release"), flow)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	post := func() int {
		w := httptest.NewRecorder()
		app.ServeHTTP(w, httptest.NewRequest("POST", "/release", strings.NewReader(`{}`)))
		return w.Code
	}
	if code := post(); code != 503 {
		t.Fatalf("a step that parks for its retry: %d, want 503", code)
	}
	fail = false
	if code := post(); code != 201 {
		t.Fatalf("a run that completes: %d, want 201", code)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if left, ok := d.left[driver.RunRunning]; !ok || left > 2*time.Second || left <= 0 {
		t.Errorf("the release had %v left (recorded %v), want at most 2s", left, ok)
	}
	if left, ok := d.left[driver.RunCompleted]; !ok || left <= 2*time.Second {
		t.Errorf("the completion had %v left (recorded %v), want the StoreTimeout (30s)", left, ok)
	}
}
