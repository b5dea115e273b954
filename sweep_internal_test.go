package oke

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// TestSweepPause: after a batch, the background sweep waits long enough to
// keep to its rate, and at least four times what the batch took, so that
// it holds the store a fifth of the time at most however slow the store.
func TestSweepPause(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		took time.Duration
		rate int
		want time.Duration
	}{
		{"the rate decides", 1000, 10 * time.Millisecond, 10_000, 90 * time.Millisecond},
		{"a slow batch decides", 1000, 50 * time.Millisecond, 10_000, 200 * time.Millisecond},
		{"exactly at the rate", 1000, 20 * time.Millisecond, 10_000, 80 * time.Millisecond},
		{"no rate: the duty cycle alone", 1000, 10 * time.Millisecond, -1, 40 * time.Millisecond},
		{"a partial batch", 100, time.Millisecond, 1000, 99 * time.Millisecond},
	} {
		if got := sweepPause(c.n, c.took, c.rate); got != c.want {
			t.Errorf("%s: sweepPause(%d, %v, %d) = %v, want %v", c.name, c.n, c.took, c.rate, got, c.want)
		}
	}
}

// fullSweeps is a driver whose every Sweep deletes a full batch: a store
// with more expired rows than the sweep will ever catch up with.
type fullSweeps struct {
	driver.Driver
	calls atomic.Int32
}

func (d *fullSweeps) Sweep(ctx context.Context, limit int) (int, error) {
	d.calls.Add(1)
	return limit, nil
}

// TestBackgroundSweepIsPaced: the periodic sweep of a store that always
// has a full batch to delete pauses after each batch for the rate's share
// (1 000 rows at 500 a second: 2 s, less the batch's own time) instead of
// deleting batch after batch, and its pause ends when the app closes.
func TestBackgroundSweepIsPaced(t *testing.T) {
	d := &fullSweeps{Driver: memory.New()}
	app := New(Config{Driver: d, SweepInterval: time.Millisecond, SweepRate: 500, PollInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	paused := make(chan time.Duration, 1)
	app.onSweepPause = func(p time.Duration) {
		select {
		case paused <- p:
		default:
		}
	}
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := <-paused
	if p <= time.Second || p > 2*time.Second {
		t.Errorf("the pause after a full batch at 500 rows/s is %v, want just under 2s", p)
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("%d batches before the first pause, want 1", n)
	}
	if err := app.Close(context.Background()); err != nil { // returns only once the sweep stopped waiting
		t.Fatal(err)
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("%d batches in all, want 1: the pause was not kept", n)
	}
}
