package oke_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// noJournal hides the memory driver's journal.
type noJournal struct{ driver.Driver }

func TestDurableFlowNeedsAJournal(t *testing.T) {
	app := oke.New(oke.Config{Driver: noJournal{memory.New()}, SweepInterval: -1})
	t.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.POST("/d"), oke.NewFlow("d.flow", oke.Options{Durable: true},
		func(context.Context, noIn, *oke.Fx) (oke.Response[int], error) { return oke.OK(1), nil }))
	app.Handle(oke.OnEvent("e"), unary("d.listener", oke.Options{}))
	err := app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `flow "d.flow"`) || !strings.Contains(err.Error(), `flow "d.listener"`) ||
		!strings.Contains(err.Error(), "journal") {
		t.Fatalf("Start = %v", err)
	}
}

// TestStepOutsideADurableFlowJustRuns: Step in a plain flow calls fn each
// time; Sleep, Claim and Run say they need a durable flow.
func TestStepOutsideADurableFlowJustRuns(t *testing.T) {
	calls := 0
	var sleepErr, claimErr error
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("d.plain", oke.Options{Idempotency: oke.Off},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
				n, _ := oke.Step(ctx, "s", func(context.Context) (int, error) { calls++; return calls, nil })
				sleepErr = oke.Sleep(ctx, "z", time.Second)
				_, claimErr = oke.Claim(ctx, "k")
				if oke.StepKey(ctx) != "" {
					t.Error("StepKey outside a step must be empty")
				}
				return oke.OK(n), nil
			}))
	})
	do(app, "POST", "/p", "")
	do(app, "POST", "/p", "")
	if calls != 2 {
		t.Fatalf("calls %d", calls)
	}
	if !errors.Is(sleepErr, oke.ErrNotDurable) || !errors.Is(claimErr, oke.ErrNotDurable) {
		t.Fatalf("sleep %v, claim %v", sleepErr, claimErr)
	}
}

// TestDurableRunOverHTTPWithoutKey: a durable flow called without a key runs
// as a journal run and answers its response; the run is in the journal.
func TestDurableRunOverHTTPWithoutKey(t *testing.T) {
	d := memory.New()
	app := newApp(t, oke.Config{Driver: d}, func(app *oke.App) {
		app.Handle(oke.POST("/d"), oke.NewFlow("d.nokey", oke.Options{Durable: true},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[string], error) {
				id, err := oke.NewID(ctx, "id")
				return oke.Created(id, "/x/"+id), err
			}))
	})
	w := do(app, "POST", "/d", "")
	if w.Code != 201 || !strings.HasPrefix(w.Header().Get("Location"), "/x/") {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	runs, _ := d.ListRuns(context.Background(), driver.RunFilter{}, 0)
	if len(runs) != 1 || runs[0].Status != driver.RunCompleted || runs[0].Result.Status != 201 {
		t.Fatalf("runs %+v", runs)
	}
	_, steps, _ := d.GetRun(context.Background(), runs[0].ID)
	if len(steps) != 1 || steps[0].Name != "id" || steps[0].Attempts != 1 {
		t.Fatalf("steps %+v", steps)
	}
	// The admin API shows it.
	adm := do(admin.Handler(app, admin.InsecureNoAuth), "GET", "/runs/"+runs[0].ID, "")
	if adm.Code != 200 || !strings.Contains(adm.Body.String(), `"name": "id"`) && !strings.Contains(adm.Body.String(), `"name":"id"`) {
		t.Fatalf("admin: %d %s", adm.Code, adm.Body)
	}
}

// TestCloseCutsRunsOffWithoutFailingThem: a run cut off by App.Close is
// released for the next start, not marked failed.
func TestCloseCutsRunsOffWithoutFailingThem(t *testing.T) {
	d := memory.New()
	started := make(chan struct{})
	app := oke.New(oke.Config{Driver: d, SweepInterval: -1, PollInterval: 5 * time.Millisecond, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	long := oke.NewFlow("d.long", oke.Options{Durable: true},
		func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[int], error) {
			return oke.Response[int]{}, func() error {
				_, err := oke.Step(ctx, "wait", func(ctx context.Context) (int, error) {
					close(started)
					<-ctx.Done()
					return 0, ctx.Err()
				})
				return err
			}()
		})
	app.Handle(oke.Internal(), long)
	app.Handle(oke.POST("/start"), oke.NewFlow("d.starter", oke.Options{Idempotency: oke.Off},
		func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[string], error) {
			id, err := oke.Run(ctx, fx, long, noIn{})
			return oke.OK(id), err
		}))
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	do(app, "POST", "/start", "")
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := app.Close(ctx); err == nil {
		t.Fatal("Close must report that it cut work off")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		runs, _ := d.ListRuns(context.Background(), driver.RunFilter{Flow: "d.long"}, 0)
		if len(runs) == 1 && runs[0].Status == driver.RunRunning && runs[0].Owner == "" {
			return // released for the next start
		}
		if len(runs) == 1 && runs[0].Status.Finished() {
			t.Fatalf("a run cut off by Close was marked %s: %s", runs[0].Status, runs[0].Error)
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs %+v", runs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReplayFromStep: a replay from step N is a new run that reuses the old
// run's saved results of steps 1..N-1 (their functions do not run) and runs
// N onwards; step numbers count from 1, and a step past the saved ones is an
// error naming the range.
func TestReplayFromStep(t *testing.T) {
	d := memory.New()
	var ran sync.Map // step name → *atomic.Int64
	count := func(name string) *atomic.Int64 {
		v, _ := ran.LoadOrStore(name, new(atomic.Int64))
		return v.(*atomic.Int64)
	}
	app := newApp(t, oke.Config{Driver: d, PollInterval: 5 * time.Millisecond}, func(app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("d.replayfrom", oke.Options{Durable: true},
			func(ctx context.Context, in noIn, fx *oke.Fx) (oke.Response[string], error) {
				out := ""
				for _, name := range []string{"a", "b", "c"} {
					v, err := oke.Step(ctx, name, func(context.Context) (string, error) {
						return fmt.Sprintf("%s%d", name, count(name).Add(1)), nil
					})
					if err != nil {
						return oke.Response[string]{}, err
					}
					out += v
				}
				return oke.OK(out), nil
			}))
	})
	if w := do(app, "POST", "/p", ""); w.Code != 200 || w.Body.String() != "\"a1b1c1\"\n" {
		t.Fatalf("first run: %d %s", w.Code, w.Body)
	}
	runs, _ := d.ListRuns(context.Background(), driver.RunFilter{}, 0)
	first := runs[0].ID
	id, err := app.ReplayFrom(context.Background(), first, 3)
	if err != nil {
		t.Fatal(err)
	}
	var run driver.Run
	var steps []driver.Step
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		run, steps, _ = d.GetRun(context.Background(), id)
		if run.Status.Finished() || time.Now().After(deadline) {
			break
		}
	}
	if run.Status != driver.RunCompleted || string(run.Result.Body) != "\"a1b1c2\"\n" || run.ReplayOf != first || len(steps) != 3 {
		t.Fatalf("replay from step 3: %+v %s, steps %d", run, run.Result.Body, len(steps))
	}
	if count("a").Load() != 1 || count("b").Load() != 1 || count("c").Load() != 2 {
		t.Fatalf("steps ran a=%d b=%d c=%d, want 1, 1, 2", count("a").Load(), count("b").Load(), count("c").Load())
	}
	if _, err := app.ReplayFrom(context.Background(), first, 5); !errors.Is(err, oke.ErrBadStep) || !strings.Contains(err.Error(), "from step 1 to 4") {
		t.Fatalf("replay from step 5 of a 3-step run: %v", err)
	}
}
