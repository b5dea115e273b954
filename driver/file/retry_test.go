package file_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
)

// TestParkedRetryAndDeadRunSurviveReopen: a step's retry parked in the
// journal, and a dead-lettered run, are in journal.json: after the driver is
// closed and the folder opened again (a restart of the process), the parked
// run is due at its wake time with its attempts and last error, and the
// next app completes it with the step journaled at attempt 2; a dead run
// stays dead (never due) until resumed, also across a reopen and a
// compaction.
func TestParkedRetryAndDeadRunSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	var ran atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	policy := oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, Jitter: -1}
	flow := oke.NewFlow("f.flaky", oke.Options{Durable: true, Retry: &policy},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[string], error) {
			v, err := oke.Step(ctx, "flaky", func(ctx context.Context) (string, error) {
				ran.Add(1)
				if failing.Load() {
					return "", errors.New("provider down")
				}
				return "ok", nil
			})
			if err != nil {
				return oke.Response[string]{}, err
			}
			return oke.OK(v), nil
		})
	start := func(d *file.Driver, poll time.Duration) *oke.App {
		t.Helper()
		app := oke.New(oke.Config{Driver: d, PollInterval: poll, RetryInline: -1, SweepInterval: -1, Logger: quietLog()})
		app.Handle(oke.POST("/f"), flow)
		if err := app.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return app
	}

	d1, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	app := start(d1, -1)
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/f", strings.NewReader(`{}`)))
	if w.Code != 503 || !strings.Contains(w.Body.String(), "OutcomeUnknown") {
		t.Fatalf("a step parked for its retry: %d %s, want 503 OutcomeUnknown", w.Code, w.Body)
	}
	runs, _ := d1.ListRuns(context.Background(), driver.RunFilter{}, 0)
	if len(runs) != 1 {
		t.Fatalf("runs %+v", runs)
	}
	id := runs[0].ID
	// A second run, dead-lettered (as the engine leaves one).
	if _, err := d1.CreateRun(context.Background(), driver.Run{ID: "run_dead", Flow: "f.flaky", Input: []byte(`{}`), Owner: "w"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d1.FinishRun(context.Background(), "run_dead", "w", driver.Finish{Status: driver.RunDead, Strikes: 4, Error: "dead-lettered"}); err != nil {
		t.Fatal(err)
	}
	app.Close(context.Background())
	if err := d1.Close(); err != nil {
		t.Fatal(err)
	}

	failing.Store(false)
	d2, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	got, _, err := d2.GetRun(context.Background(), id)
	if err != nil || got.Status != driver.RunRunning || got.Owner != "" || got.NextAttempts != 1 || !strings.Contains(got.Error, "provider down") {
		t.Fatalf("parked run after reopen: %+v, %v", got, err)
	}
	dead, _, _ := d2.GetRun(context.Background(), "run_dead")
	if dead.Status != driver.RunDead || dead.Strikes != 4 {
		t.Fatalf("dead run after reopen: %+v", dead)
	}
	app = start(d2, 5*time.Millisecond)
	defer app.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, steps, err := d2.GetRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == driver.RunCompleted {
			if len(steps) != 1 || steps[0].Attempts != 2 {
				t.Fatalf("steps %+v, want flaky saved at attempt 2", steps)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %v after 30 s", got.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the step ran %d times, want 2", n)
	}
	if _, _, err := d2.AcquireRun(context.Background(), "run_dead", "intruder", time.Minute); !errors.Is(err, driver.ErrNotDue) {
		t.Errorf("AcquireRun of the dead run: %v, want ErrNotDue", err)
	}
	app.Close(context.Background())
	// Compaction folds the dead run into its run record: still dead, strikes kept.
	if err := d2.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := d2.Close(); err != nil {
		t.Fatal(err)
	}
	d3, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	if dead, _, _ := d3.GetRun(context.Background(), "run_dead"); dead.Status != driver.RunDead || dead.Strikes != 4 || dead.Error != "dead-lettered" {
		t.Fatalf("dead run after compaction and reopen: %+v", dead)
	}
	if _, err := d3.ResumeRun(context.Background(), "run_dead"); err != nil {
		t.Fatal(err)
	}
	if err := d3.Close(); err != nil {
		t.Fatal(err)
	}
	d4, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d4.Close()
	if r, _, _ := d4.GetRun(context.Background(), "run_dead"); r.Status != driver.RunRunning || r.Strikes != 0 || r.NextAttempts != 0 {
		t.Fatalf("resumed run after reopen: %+v", r)
	}
	if _, _, err := d4.AcquireRun(context.Background(), "run_dead", "w2", time.Minute); err != nil {
		t.Fatalf("AcquireRun of the resumed run after reopen: %v", err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
