package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/idem"
)

// RunDurable runs the durable-execution rules of DESIGN.md section 4 and the
// durable rows of section 3 end to end: an oke.App with durable flows on the
// driver under test, which must implement driver.Journal.
func RunDurable(t *testing.T, newDriver func(t *testing.T) driver.Driver) {
	t.Helper()
	runRules(t, newDriver, durableRules)
}

var durableRules = []rowRule{
	{"CutOffStepRunsAgainSavedStepsDoNot", testCutOffStep},
	{"RetriedKeyResumesItsJournalRunAfterLeaseLapses", testRetriedKeyResumes},
	{"RetryWhileTheRunIsHeldElsewhereIs409ThenItsResult", testRetryWhileHeld},
	{"StoreUnreachableWhileSavingStepRunsItAgainLater", testSaveFailure},
	{"ReplayIsANewRunThatRunsEveryStep", testReplay},
	{"EventEmittedTwiceStartsTwoRunsUnlessDeduped", testEventTwice},
	{"EmitAndRunInsideAStepHappenOnce", testEmitInStepOnce},
	{"ClaimLetsExactlyOneOf50RunsThrough", testClaimOneOf50},
	{"DurableSleepStores204AndTheSchedulerContinues", testDurableSleep},
	{"SavedDeclaredFailureIsReturnedAgain", testSavedFailure},
	{"DuplicateStepNameIsAnError", testDuplicateStep},
	{"StepMismatchOnResumeIsAnError", testStepMismatch},
	{"StepKeyAndNewIDAreStableAcrossPickUps", testStableKeys},
	{"TwoAppsWithDifferentFlowsOnOneStoreRunOnlyTheirOwn", testTwoAppsOneStore},
	{"PatchedKeepsRunsInFlightOnTheirCodeAcrossDeploys", testPatched},
	{"ParallelStepsRunAtOnceAndAreJournaledInCallOrder", testParallelSteps},
}

// journalFault wraps a journal driver to inject save failures.
type journalFault struct {
	*faultDriver
	driver.Journal
	failSaves atomic.Int32 // the next n SaveStep calls fail
	failStep  sync.Map     // step name → struct{}: its next SaveStep fails
}

func (j *journalFault) SaveStep(ctx context.Context, id, owner string, s driver.Step) error {
	if j.failSaves.Add(-1) >= 0 {
		return errInjected
	}
	if _, ok := j.failStep.LoadAndDelete(s.Name); ok {
		return errInjected
	}
	return j.Journal.SaveStep(ctx, id, owner, s)
}

type durableHarness struct {
	*harness
	j     *journalFault
	jr    driver.Journal // the driver's own journal
	steps sync.Map       // step name → *atomic.Int64
}

func newDurable(t *testing.T, d driver.Driver, cfg oke.Config, bind func(h *durableHarness, app *oke.App)) *durableHarness {
	t.Helper()
	jr, ok := d.(driver.Journal)
	if !ok {
		t.Fatalf("%T does not implement driver.Journal", d)
	}
	dh := &durableHarness{jr: jr}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 30 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	h := &harness{t: t, d: d, fault: &faultDriver{Driver: d}}
	dh.harness = h
	dh.j = &journalFault{faultDriver: h.fault, Journal: dh.jr}
	cfg.Driver = dh.j
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Gate == nil {
		cfg.Gate = testGate
	}
	h.app = oke.New(cfg)
	bind(dh, h.app)
	if err := h.app.Start(context.Background()); err != nil {
		t.Fatalf("start app: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.app.Close(ctx)
	})
	return dh
}

func (h *durableHarness) ranStep(name string) int64 {
	c, _ := h.steps.LoadOrStore(name, new(atomic.Int64))
	return c.(*atomic.Int64).Load()
}

// step is oke.Step counting how often fn actually ran.
func step[T any](h *durableHarness, ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	return oke.Step(ctx, name, func(ctx context.Context) (T, error) {
		c, _ := h.steps.LoadOrStore(name, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		return fn(ctx)
	})
}

// eventually polls cond until it holds, failing after 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runsOf lists the runs of flow.
func (h *durableHarness) runsOf(flow string) []driver.Run {
	runs, err := h.jr.ListRuns(context.Background(), driver.RunFilter{Flow: flow}, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

func (h *durableHarness) finished(flow string, n int) func() bool {
	return func() bool {
		done := 0
		for _, r := range h.runsOf(flow) {
			if r.Status.Finished() {
				done++
			}
		}
		return done >= n
	}
}

type pipeIn struct {
	Tag string `json:"tag"`
}

// twoSteps is a durable flow: step "a", then step "b" (which waits on gate
// when it is not nil), then 201 with both results.
func (h *durableHarness) twoSteps(name string, gate chan struct{}) *oke.Flow[pipeIn, string] {
	return oke.NewFlow(name, oke.Options{Durable: true}, func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
		a, err := step(h, ctx, name+"/a", func(context.Context) (string, error) { return "A", nil })
		if err != nil {
			return oke.Response[string]{}, err
		}
		b, err := step(h, ctx, name+"/b", func(context.Context) (string, error) {
			if gate != nil {
				<-gate
			}
			return "B", nil
		})
		if err != nil {
			return oke.Response[string]{}, err
		}
		return oke.Created(in.Tag+":"+a+b, ""), nil
	})
}

// deadRun leaves a run of flow in the journal as a crashed process would: its
// first steps saved (the dead process went on to the next one: that counts
// as an attempt of it), and a lease that lapses.
func (h *durableHarness) deadRun(flow, input string, saved []string) driver.Run {
	h.t.Helper()
	ctx := context.Background()
	run, err := h.jr.CreateRun(ctx, driver.Run{ID: "run_dead_" + flow, Flow: flow, Input: []byte(input),
		Tenant: "default", Principal: "anon", Owner: "dead-process"}, short)
	if err != nil {
		h.t.Fatal(err)
	}
	for i, name := range saved {
		if err := h.jr.SaveStep(ctx, run.ID, "dead-process", driver.Step{Seq: i + 1, Name: name,
			Result: []byte(`"` + strings.ToUpper(name[len(name)-1:]) + `"`), Attempts: 1}); err != nil {
			h.t.Fatal(err)
		}
	}
	return run
}

func testCutOffStep(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{PollInterval: -1}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.Internal(), h.twoSteps("t.cut", nil))
	})
	// A crash cut step b off before its result was saved; a was saved.
	run := h.deadRun("t.cut", `{"tag":"x"}`, []string{"t.cut/a"}) // cut off in step b
	time.Sleep(after)                                             // the dead owner's lease lapses
	// A new scheduler (this app) picks the run up on start.
	h2 := newDurable(t, d, oke.Config{}, func(h2 *durableHarness, app *oke.App) {
		app.Handle(oke.Internal(), h.twoSteps("t.cut", nil))
	})
	_ = h2
	eventually(t, "the run to complete", h.finished("t.cut", 1))
	got, steps, err := h.jr.GetRun(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != driver.RunCompleted || string(got.Result.Body) != "\"x:AB\"\n" {
		t.Fatalf("run %s %s %q", got.Status, got.Error, got.Result.Body)
	}
	if h.ranStep("t.cut/a") != 0 || h.ranStep("t.cut/b") != 1 {
		t.Fatalf("saved step a ran %d times (want 0), cut step b %d (want 1)", h.ranStep("t.cut/a"), h.ranStep("t.cut/b"))
	}
	if len(steps) != 2 || steps[1].Attempts != 2 {
		t.Fatalf("steps %+v: want b saved with 2 attempts", steps)
	}
}

func testRetriedKeyResumes(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{PollInterval: -1}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/pipe"), h.twoSteps("t.resume", nil))
	})
	// The first attempt claimed the key, saved step a, and died.
	run := h.deadRun("t.resume", `{"tag":"k"}`, []string{"t.resume/a"}) // cut off in step b
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.resume", Key: key1}
	if _, err := h.d.Claim(context.Background(), driver.ClaimRequest{Key: k, Owner: "dead-process", Lease: short, TTL: day,
		Fingerprint: idem.Fingerprint("t.resume", []byte(`{"tag":"k"}`)), RunID: run.ID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(after)
	w := h.req("POST", "/pipe", `{"tag":"k"}`, "Idempotency-Key", key1)
	if w.Code != 201 || w.Body.String() != "\"k:AB\"\n" || replayed(w) {
		t.Fatalf("retry after the crash: %d %q", w.Code, w.Body)
	}
	if h.ranStep("t.resume/a") != 0 || h.ranStep("t.resume/b") != 1 {
		t.Fatalf("a ran %d (want 0: saved), b ran %d (want 1)", h.ranStep("t.resume/a"), h.ranStep("t.resume/b"))
	}
	if runs := h.runsOf("t.resume"); len(runs) != 1 {
		t.Fatalf("%d runs: the retry must resume the run, not start another", len(runs))
	}
	if w := h.req("POST", "/pipe", `{"tag":"k"}`, "Idempotency-Key", key1); !replayed(w) || w.Code != 201 {
		t.Fatalf("the final response was not stored: %d", w.Code)
	}
}

func testRetryWhileHeld(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{PollInterval: -1}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/pipe"), h.twoSteps("t.held", nil))
	})
	ctx := context.Background()
	// Another process (say, the restarted app's scheduler) holds the run;
	// the request that started it died and its key's row lapsed.
	run, err := h.jr.CreateRun(ctx, driver.Run{ID: "run_held", Flow: "t.held", Input: []byte(`{"tag":"h"}`),
		Tenant: "default", Principal: "anon", Owner: "elsewhere"}, hold)
	if err != nil {
		t.Fatal(err)
	}
	k := driver.Key{Tenant: "default", Principal: "anon", Flow: "t.held", Key: key1}
	if _, err := h.d.Claim(ctx, driver.ClaimRequest{Key: k, Owner: "dead-process", Lease: short, TTL: day,
		Fingerprint: idem.Fingerprint("t.held", []byte(`{"tag":"h"}`)), RunID: run.ID}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(after)
	w := h.req("POST", "/pipe", `{"tag":"h"}`, "Idempotency-Key", key1)
	wantCode(t, "retry while held", w, 409, "IdempotencyInProgress")
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("409 without a Retry-After: %q", ra)
	}
	// The other owner finishes the run.
	if err := h.jr.FinishRun(ctx, run.ID, "elsewhere", driver.Finish{Status: driver.RunCompleted,
		Result: &driver.Response{Status: 201, ContentType: "application/json", Body: []byte("\"h:AB\"\n")}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the yielded key lapses
	w = h.req("POST", "/pipe", `{"tag":"h"}`, "Idempotency-Key", key1)
	if w.Code != 201 || w.Body.String() != "\"h:AB\"\n" {
		t.Fatalf("retry after the run finished elsewhere: %d %q", w.Code, w.Body)
	}
	if w := h.req("POST", "/pipe", `{"tag":"h"}`, "Idempotency-Key", key1); !replayed(w) {
		t.Fatal("the run's response was not stored under the key")
	}
	if h.ranStep("t.held/a") != 0 {
		t.Fatal("the request ran the run itself while it was held elsewhere")
	}
}

func testSaveFailure(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/pipe"), h.twoSteps("t.save", nil))
	})
	h.j.failSaves.Store(1) // step a's result cannot be saved
	w := h.req("POST", "/pipe", `{"tag":"s"}`, "Idempotency-Key", key1)
	wantCode(t, "save failed", w, 503, "OutcomeUnknown")
	eventually(t, "the run to be retried and complete", h.finished("t.save", 1))
	if n := h.ranStep("t.save/a"); n != 2 {
		t.Fatalf("step a ran %d times, want 2 (again after the failed save)", n)
	}
	if n := h.ranStep("t.save/b"); n != 1 {
		t.Fatalf("step b ran %d times, want 1", n)
	}
	runs := h.runsOf("t.save")
	if len(runs) != 1 || runs[0].Attempts != 2 {
		t.Fatalf("runs %+v: want one run picked up twice", runs)
	}
}

func testReplay(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/pipe"), h.twoSteps("t.replay", nil))
	})
	wantStatus(t, "first run", h.req("POST", "/pipe", `{"tag":"r"}`), 201)
	first := h.runsOf("t.replay")[0]
	id, err := h.app.Replay(context.Background(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replay to complete", h.finished("t.replay", 2))
	if h.ranStep("t.replay/a") != 2 || h.ranStep("t.replay/b") != 2 {
		t.Fatalf("a replay must run every step again: a %d, b %d", h.ranStep("t.replay/a"), h.ranStep("t.replay/b"))
	}
	got, _, _ := h.jr.GetRun(context.Background(), id)
	if got.ReplayOf != first.ID || got.ID == first.ID || string(got.Input) != string(first.Input) {
		t.Fatalf("replay run %+v of %s", got, first.ID)
	}
}

func testEventTwice(t *testing.T, d driver.Driver) {
	var handled atomic.Int64
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.OnEvent("thing.happened"), oke.NewFlow("t.onthing", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				handled.Add(1)
				return oke.OK(in.Tag), nil
			}))
		app.Handle(oke.POST("/emit"), oke.NewFlow("t.emitter", oke.Options{},
			func(ctx context.Context, in struct {
				Tag string `json:"tag"`
				ID  string `json:"id,omitempty"`
			}, fx *oke.Fx) (oke.Response[string], error) {
				var opts []oke.EmitOption
				if in.ID != "" {
					opts = append(opts, oke.EventID(in.ID))
				}
				return oke.OK("ok"), fx.Emit(ctx, "thing.happened", pipeIn{Tag: in.Tag}, opts...)
			}))
	})
	h.req("POST", "/emit", `{"tag":"x"}`)
	h.req("POST", "/emit", `{"tag":"x"}`)
	eventually(t, "two runs", h.finished("t.onthing", 2))
	h.req("POST", "/emit", `{"tag":"y","id":"evt_1"}`)
	h.req("POST", "/emit", `{"tag":"y","id":"evt_1"}`)
	eventually(t, "the deduped run", h.finished("t.onthing", 3))
	time.Sleep(after)
	if n := len(h.runsOf("t.onthing")); n != 3 {
		t.Fatalf("%d runs: two emits without an ID start two runs, two with one ID start one", n)
	}
	if handled.Load() != 3 {
		t.Fatalf("handled %d events, want 3", handled.Load())
	}
}

func testEmitInStepOnce(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		child := oke.NewFlow("t.child", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				return oke.OK(in.Tag), nil
			})
		app.Handle(oke.Internal(), child)
		app.Handle(oke.OnEvent("t.ev"), oke.NewFlow("t.listener", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				return oke.OK(in.Tag), nil
			}))
		app.Handle(oke.POST("/p"), oke.NewFlow("t.parent", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				_, err := step(h, ctx, "start and emit", func(ctx context.Context) (string, error) {
					id, err := oke.Run(ctx, fx, child, in)
					if err != nil {
						return "", err
					}
					return id, fx.Emit(ctx, "t.ev", in)
				})
				if err != nil {
					return oke.Response[string]{}, err
				}
				return oke.Created("ok", ""), nil
			}))
	})
	h.j.failSaves.Store(1) // the step's work happens, its result is not saved
	wantCode(t, "save failed", h.req("POST", "/p", `{"tag":"e"}`, "Idempotency-Key", key1), 503, "OutcomeUnknown")
	eventually(t, "the parent to finish", h.finished("t.parent", 1))
	eventually(t, "the child and listener to finish", func() bool { return h.finished("t.child", 1)() && h.finished("t.listener", 1)() })
	time.Sleep(after)
	if h.ranStep("start and emit") != 2 {
		t.Fatalf("the step ran %d times, want 2", h.ranStep("start and emit"))
	}
	if c, l := len(h.runsOf("t.child")), len(h.runsOf("t.listener")); c != 1 || l != 1 {
		t.Fatalf("a step that ran twice started %d child runs and %d listener runs; want 1 and 1", c, l)
	}
}

func testClaimOneOf50(t *testing.T, d driver.Driver) {
	var won, lost atomic.Int64
	h := newDurable(t, d, oke.Config{MaxConcurrentRuns: 50}, func(h *durableHarness, app *oke.App) {
		worker := oke.NewFlow("t.claimer", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[bool], error) {
				ok, err := oke.Claim(ctx, "order:42")
				if err != nil {
					return oke.Response[bool]{}, err
				}
				if ok {
					won.Add(1)
				} else {
					lost.Add(1)
				}
				return oke.OK(ok), nil
			})
		app.Handle(oke.Internal(), worker)
		app.Handle(oke.POST("/fan"), oke.NewFlow("t.fan", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
				for i := 0; i < 50; i++ {
					if _, err := oke.Run(ctx, fx, worker, pipeIn{Tag: fmt.Sprint(i)}); err != nil {
						return oke.Response[int]{}, err
					}
				}
				return oke.OK(50), nil
			}))
	})
	wantStatus(t, "fan out", h.req("POST", "/fan", ""), 200)
	eventually(t, "50 runs", h.finished("t.claimer", 50))
	if won.Load() != 1 || lost.Load() != 49 {
		t.Fatalf("%d runs won the claim and %d lost; want 1 and 49", won.Load(), lost.Load())
	}
}

func testDurableSleep(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/remind"), oke.NewFlow("t.remind", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				if _, err := step(h, ctx, "before", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return oke.Response[string]{}, err
				}
				if err := oke.Sleep(ctx, "wait", nap); err != nil {
					return oke.Response[string]{}, err
				}
				_, err := step(h, ctx, "after", func(context.Context) (int, error) { return 2, nil })
				return oke.Created("sent", ""), err
			}))
	})
	w := h.req("POST", "/remind", `{"tag":"z"}`, "Idempotency-Key", key1)
	if w.Code != 204 || w.Body.Len() != 0 {
		t.Fatalf("a durable sleep answers 204 at once: %d %q", w.Code, w.Body)
	}
	if w := h.req("POST", "/remind", `{"tag":"z"}`, "Idempotency-Key", key1); w.Code != 204 || !replayed(w) {
		t.Fatalf("a retry replays the 204: %d replayed=%v", w.Code, replayed(w))
	}
	eventually(t, "the scheduler to continue the run", h.finished("t.remind", 1))
	if h.ranStep("before") != 1 || h.ranStep("after") != 1 {
		t.Fatalf("before ran %d, after ran %d; want 1 and 1", h.ranStep("before"), h.ranStep("after"))
	}
	run := h.runsOf("t.remind")[0]
	if run.Status != driver.RunCompleted || run.Attempts != 2 {
		t.Fatalf("run %s after %d pick-ups", run.Status, run.Attempts)
	}
}

// nap is how long the durable-sleep rules sleep: long enough that saving
// the sleep (an fsync, a round trip on a loaded machine) ends before the
// wake time, or the run does not park at all (a sleep already over goes on).
const nap = 300 * time.Millisecond

func testSavedFailure(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("t.savedfail", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				_, err := step(h, ctx, "charge", func(context.Context) (string, error) {
					return "", fx.Fail(402, "PaymentDeclined", "declined")
				})
				if err == nil {
					return oke.Response[string]{}, errors.New("want the saved failure")
				}
				if !errors.Is(err, oke.Fail(402, "PaymentDeclined", "")) {
					return oke.Response[string]{}, err
				}
				// Sleep so that the run picks up again and replays the step.
				if err := oke.Sleep(ctx, "pause", nap); err != nil {
					return oke.Response[string]{}, err
				}
				return oke.Response[string]{}, err
			}))
	})
	w := h.req("POST", "/p", `{"tag":"f"}`)
	wantStatus(t, "first", w, 204)
	eventually(t, "the run to end", h.finished("t.savedfail", 1))
	run := h.runsOf("t.savedfail")[0]
	if run.Status != driver.RunFailed || run.Result == nil || run.Result.Status != 402 || h.ranStep("charge") != 1 {
		t.Fatalf("run %s %+v; charge ran %d times", run.Status, run.Result, h.ranStep("charge"))
	}
}

func testDuplicateStep(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("t.dup", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				for i := 0; i < 2; i++ {
					if _, err := step(h, ctx, "same", func(context.Context) (int, error) { return i, nil }); err != nil {
						return oke.Response[string]{}, err
					}
				}
				return oke.OK("no"), nil
			}))
	})
	wantStatus(t, "duplicate step", h.req("POST", "/p", `{"tag":"d"}`), 500)
	run := h.runsOf("t.dup")[0]
	if run.Status != driver.RunFailed || !strings.Contains(run.Error, `"same" is called twice`) {
		t.Fatalf("run %s: %q", run.Status, run.Error)
	}
}

func testStepMismatch(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{PollInterval: -1}, func(h *durableHarness, app *oke.App) {})
	run := h.deadRun("t.mismatch", `{}`, []string{"old/a"})
	time.Sleep(after)
	h2 := newDurable(t, d, oke.Config{}, func(_ *durableHarness, app *oke.App) {
		app.Handle(oke.Internal(), h.twoSteps("t.mismatch", nil))
	})
	_ = h2
	eventually(t, "the run to fail", h.finished("t.mismatch", 1))
	got, _, _ := h.jr.GetRun(context.Background(), run.ID)
	if got.Status != driver.RunFailed || !strings.Contains(got.Error, `step 1 is "old/a" in the journal`) {
		t.Fatalf("run %s: %q", got.Status, got.Error)
	}
	if h.ranStep("t.mismatch/a") != 0 {
		t.Fatal("a mismatched step must not run")
	}
}

func testStableKeys(t *testing.T, d driver.Driver) {
	var (
		mu   sync.Mutex
		keys []string
		ids  []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("t.keys", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				id, err := oke.NewID(ctx, "refund id")
				if err != nil {
					return oke.Response[string]{}, err
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				_, err = step(h, ctx, "refund", func(ctx context.Context) (int, error) {
					req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
					resp, err := fx.Fetch(req)
					if err != nil {
						return 0, err
					}
					resp.Body.Close()
					return resp.StatusCode, nil
				})
				if err != nil {
					return oke.Response[string]{}, err
				}
				return oke.Created(id, ""), nil
			}))
	})
	h.j.failStep.Store("refund", struct{}{}) // the refund happens; its result is not saved
	w := h.req("POST", "/p", `{"tag":"k"}`, "Idempotency-Key", key1)
	wantCode(t, "first attempt", w, 503, "OutcomeUnknown")
	eventually(t, "the run to be picked up again and complete", h.finished("t.keys", 1))
	run := h.runsOf("t.keys")[0]
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != run.ID+"/refund" || keys[1] != keys[0] {
		t.Fatalf("the provider saw keys %q: want the step key %q on both attempts", keys, run.ID+"/refund")
	}
	if len(ids) != 2 || ids[0] != ids[1] || len(ids[0]) != 36 {
		t.Fatalf("NewID gave %q across two pick-ups: want one UUID, twice", ids)
	}
}

// Two apps with different flows on one store (two services on one Postgres
// schema): each scheduler must take only its own flows' runs. Before, either
// scheduler took any due run, and one it did not bind it released for the
// retry delay — here an hour — so the other app's runs stalled.
func testTwoAppsOneStore(t *testing.T, d driver.Driver) {
	const perApp = 8
	cfg := oke.Config{RetryDelay: time.Hour}
	bind := func(name string) func(h *durableHarness, app *oke.App) {
		return func(h *durableHarness, app *oke.App) {
			app.Handle(oke.POST("/remind"), oke.NewFlow(name, oke.Options{Durable: true},
				func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
					if err := oke.Sleep(ctx, "wait", nap); err != nil {
						return oke.Response[string]{}, err
					}
					_, err := step(h, ctx, "after", func(context.Context) (int, error) { return 1, nil })
					return oke.Created("sent", ""), err
				}))
		}
	}
	a := newDurable(t, d, cfg, func(h *durableHarness, app *oke.App) {
		bind("a.remind")(h, app)
		// A run that stays asleep for the test: app b starts while the
		// store holds an unfinished run of a flow it does not bind.
		app.Handle(oke.POST("/later"), oke.NewFlow("a.later", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				return oke.Response[string]{}, oke.Sleep(ctx, "wait", time.Hour)
			}))
	})
	wantStatus(t, "app a's long sleep", a.req("POST", "/later", `{"tag":"later"}`), 204)
	for i := range perApp {
		wantStatus(t, "app a", a.req("POST", "/remind", fmt.Sprintf(`{"tag":"a%d"}`, i)), 204)
	}
	logs := &syncBuffer{}
	bcfg := cfg
	bcfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b := newDurable(t, d, bcfg, bind("b.remind"))
	for i := range perApp {
		wantStatus(t, "app b", b.req("POST", "/remind", fmt.Sprintf(`{"tag":"b%d"}`, i)), 204)
	}
	eventually(t, "every run of both apps to finish", func() bool {
		return a.finished("a.remind", perApp)() && b.finished("b.remind", perApp)()
	})
	for _, flow := range []string{"a.remind", "b.remind"} {
		for _, r := range a.runsOf(flow) {
			// Created by its request, picked up once by its own app's
			// scheduler when the sleep ended (or never parked, if saving
			// the sleep outlasted the nap): no other pick-up.
			if r.Status != driver.RunCompleted || r.Attempts > 2 {
				t.Errorf("run %s of %s: %s after %d pick-ups, want completed after at most 2", r.ID, flow, r.Status, r.Attempts)
			}
		}
	}
	if a.ranStep("after") != perApp || b.ranStep("after") != perApp {
		t.Errorf("the steps ran %d and %d times, want %d each", a.ranStep("after"), b.ranStep("after"), perApp)
	}
	// App b started while a's runs were asleep: it says the store is shared.
	eventually(t, "app b to warn of another app's runs", func() bool {
		return strings.Contains(logs.String(), "flows this app does not bind") && strings.Contains(logs.String(), "a.later")
	})
}

// syncBuffer is a bytes.Buffer a logger may write while a test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A flow changes twice while runs are in flight (three deploys, switched by
// version): v2 adds a patch, v3 deprecates it. Each run picks up on the
// next version — the flow bumps the version as it parks — and must match
// its journal: no StepMismatchError, every step once.
func testPatched(t *testing.T, d driver.Driver) {
	var version atomic.Int32
	version.Store(1)
	var deployed sync.Map // tags whose run bumped the version
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("t.patch", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				v := version.Load()
				one := func(ctx context.Context) (int, error) { return 1, nil }
				if _, err := step(h, ctx, "a", one); err != nil {
					return oke.Response[string]{}, err
				}
				var err error
				switch v {
				case 1:
					_, err = step(h, ctx, "b", one)
				case 2:
					var ok bool
					if ok, err = oke.Patched(ctx, "p"); err == nil && ok {
						_, err = step(h, ctx, "c", one)
					} else if err == nil {
						_, err = step(h, ctx, "b", one)
					}
				default:
					if err = oke.DeprecatePatch(ctx, "p"); err == nil {
						_, err = step(h, ctx, "c", one)
					}
				}
				if err != nil {
					return oke.Response[string]{}, err
				}
				// The next deploy is out before the run wakes (or, when saving
				// the sleep outlasted the nap and it never parked, before
				// the next request).
				err = oke.Sleep(ctx, "wait", nap)
				if strings.HasPrefix(in.Tag, "deploy") {
					if _, done := deployed.LoadOrStore(in.Tag, true); !done {
						version.Add(1)
					}
				}
				if err != nil {
					return oke.Response[string]{}, err
				}
				_, err = step(h, ctx, "d", one)
				return oke.Created(fmt.Sprint("v", v), ""), err
			}))
	})
	steps := func(runs int) [][]string {
		t.Helper()
		eventually(t, "the runs to finish", h.finished("t.patch", runs))
		var out [][]string
		for _, r := range h.runsOf("t.patch") {
			run, saved, err := h.jr.GetRun(t.Context(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if run.Status != driver.RunCompleted {
				t.Fatalf("run %s: %s (%s), want completed", run.ID, run.Status, run.Error)
			}
			var names []string
			for _, s := range saved {
				names = append(names, s.Name)
			}
			out = append(out, names)
		}
		return out
	}
	// One at a time: a patch is deprecated only once the runs older than
	// it have finished.
	wantStatus(t, "a v1 run", h.req("POST", "/p", `{"tag":"deploy-1"}`), 204)
	steps(1)
	wantStatus(t, "a v2 run", h.req("POST", "/p", `{"tag":"deploy-2"}`), 204)
	steps(2)
	wantStatus(t, "a v3 run", h.req("POST", "/p", `{"tag":"v3"}`), 204)
	got := steps(3)
	want := [][]string{
		{"a", "b", "wait", "d"},                // began on v1, ended on v2: kept to the old branch
		{"a", "oke.patch:p", "c", "wait", "d"}, // began on v2, ended on v3: the marker is consumed
		{"a", "c", "wait", "d"},                // v3 only: no marker
	}
	for i := range want {
		if i >= len(got) || !slices.Equal(got[i], want[i]) {
			t.Fatalf("the runs' steps are %q, want %q", got, want)
		}
	}
	for name, n := range map[string]int64{"a": 3, "b": 1, "c": 2, "d": 3} {
		if h.ranStep(name) != n {
			t.Errorf("step %s ran %d times, want %d", name, h.ranStep(name), n)
		}
	}
}

// Steps started with oke.Go run at the same time — "slow" waits until
// "fast", started after it, has run — and are journaled in the order they
// were started, each once: the pick-up after the sleep replays them.
// oke.First saves the first answer, and the pick-up returns it again.
func testParallelSteps(t *testing.T, d driver.Driver) {
	fastRan := make(chan struct{})
	var fastOnce sync.Once
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/par"), oke.NewFlow("t.parallel", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				slow := oke.Go(ctx, "slow", func(ctx context.Context) (int, error) {
					h.count("slow")
					select {
					case <-fastRan:
						return 1, nil
					case <-time.After(30 * time.Second):
						return 0, errors.New("slow: fast never ran: the steps did not run at the same time")
					}
				})
				fast := oke.Go(ctx, "fast", func(ctx context.Context) (int, error) {
					h.count("fast")
					fastOnce.Do(func() { close(fastRan) })
					return 2, nil
				})
				if err := oke.WaitAll(ctx, slow, fast); err != nil {
					return oke.Response[string]{}, err
				}
				i, v, err := oke.First(ctx, "quote", func(ctx context.Context) (string, error) {
					<-ctx.Done() // never answers first: cancelled once the other wins
					return "", ctx.Err()
				}, func(ctx context.Context) (string, error) {
					h.count("quote")
					return "q", nil
				})
				if err != nil {
					return oke.Response[string]{}, err
				}
				if err := oke.Sleep(ctx, "wait", nap); err != nil {
					return oke.Response[string]{}, err
				}
				a, _ := slow.Wait(ctx)
				b, _ := fast.Wait(ctx)
				return oke.Created(fmt.Sprintf("%d+%d %d:%s", a, b, i, v), ""), nil
			}))
	})
	wantStatus(t, "first", h.req("POST", "/par", `{"tag":"p"}`, "Idempotency-Key", key1), 204)
	eventually(t, "the run to finish", h.finished("t.parallel", 1))
	r := h.runsOf("t.parallel")[0]
	run, saved, err := h.jr.GetRun(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range saved {
		names = append(names, s.Name)
	}
	if run.Status != driver.RunCompleted || run.Result == nil || strings.TrimSpace(string(run.Result.Body)) != `"1+2 1:q"` {
		t.Fatalf("run %s (%s), result %+v", run.Status, run.Error, run.Result)
	}
	if want := []string{"slow", "fast", "quote", "wait"}; !slices.Equal(names, want) {
		t.Errorf("journal %q, want %q (the order the steps were started, not the order they ended)", names, want)
	}
	for _, n := range []string{"slow", "fast", "quote"} {
		if h.ranStep(n) != 1 {
			t.Errorf("%s ran %d times, want once (the pick-up replays it)", n, h.ranStep(n))
		}
	}
}

// count counts a run of the step named name, for ranStep.
func (h *durableHarness) count(name string) {
	c, _ := h.steps.LoadOrStore(name, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
}
