package oke_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// spyDriver is a memory driver that records every call made with a context
// that has no deadline: on a store that stops answering, such a call would
// hold its caller for as long as the store hangs. Every method of the
// memory driver that takes a context is checked, so a new call site with no
// deadline, in a request or in a background loop, is found whatever
// primitive it uses.
type spyDriver struct {
	*memory.Driver
	mu      sync.Mutex
	missing map[string]string // "Primitive ← caller" → first stack seen
}

func newSpyDriver() *spyDriver {
	return &spyDriver{Driver: memory.New(), missing: map[string]string{}}
}

func (d *spyDriver) check(ctx context.Context, op string) {
	if _, ok := ctx.Deadline(); ok {
		return
	}
	pcs := make([]uintptr, 24)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var stack []string
	caller := ""
	for first := true; ; first = false {
		f, more := frames.Next()
		if first && strings.HasSuffix(f.File, "_test.go") {
			return // the test's own look at the store
		}
		name := f.Function
		if i := strings.LastIndex(name, "/"); i >= 0 {
			name = name[i+1:]
		}
		stack = append(stack, fmt.Sprintf("%s (%s:%d)", name, f.File[strings.LastIndex(f.File, "/")+1:], f.Line))
		if caller == "" && !strings.HasPrefix(name, "deadline.") && !strings.Contains(f.File, "_test.go") {
			caller = name
		}
		if !more {
			break
		}
	}
	k := op + " ← " + caller
	d.mu.Lock()
	if _, ok := d.missing[k]; !ok {
		d.missing[k] = strings.Join(stack, "\n\t\t")
	}
	d.mu.Unlock()
}

func (d *spyDriver) report(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := make([]string, 0, len(d.missing))
	for k := range d.missing {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Errorf("store call with no deadline: %s\n\t\t%s", k, d.missing[k])
	}
}

func (d *spyDriver) Claim(ctx context.Context, r driver.ClaimRequest) (driver.ClaimResult, error) {
	d.check(ctx, "Claim")
	return d.Driver.Claim(ctx, r)
}
func (d *spyDriver) Renew(ctx context.Context, k driver.Key, owner string, lease time.Duration) error {
	d.check(ctx, "Renew")
	return d.Driver.Renew(ctx, k, owner, lease)
}
func (d *spyDriver) Complete(ctx context.Context, k driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	d.check(ctx, "Complete")
	return d.Driver.Complete(ctx, k, owner, resp, ttl)
}
func (d *spyDriver) Release(ctx context.Context, k driver.Key, owner string) error {
	d.check(ctx, "Release")
	return d.Driver.Release(ctx, k, owner)
}
func (d *spyDriver) Get(ctx context.Context, k driver.Key) (driver.Row, error) {
	d.check(ctx, "Get")
	return d.Driver.Get(ctx, k)
}
func (d *spyDriver) List(ctx context.Context, after driver.Key, limit int) ([]driver.Row, error) {
	d.check(ctx, "List")
	return d.Driver.List(ctx, after, limit)
}
func (d *spyDriver) Sweep(ctx context.Context, limit int) (int, error) {
	d.check(ctx, "Sweep")
	return d.Driver.Sweep(ctx, limit)
}
func (d *spyDriver) Delete(ctx context.Context, k driver.Key) error {
	d.check(ctx, "Delete")
	return d.Driver.Delete(ctx, k)
}
func (d *spyDriver) DeleteIdle(ctx context.Context, k driver.Key) (driver.Row, bool, error) {
	d.check(ctx, "DeleteIdle")
	return d.Driver.DeleteIdle(ctx, k)
}
func (d *spyDriver) FindRows(ctx context.Context, k driver.Key, limit int) ([]driver.Row, error) {
	d.check(ctx, "FindRows")
	return d.Driver.FindRows(ctx, k, limit)
}
func (d *spyDriver) CancelRun(ctx context.Context, id string, result driver.Response, msg string) (driver.Run, error) {
	d.check(ctx, "CancelRun")
	return d.Driver.CancelRun(ctx, id, result, msg)
}
func (d *spyDriver) ResumeRun(ctx context.Context, id string) (driver.Run, error) {
	d.check(ctx, "ResumeRun")
	return d.Driver.ResumeRun(ctx, id)
}
func (d *spyDriver) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	d.check(ctx, "CreateRun")
	return d.Driver.CreateRun(ctx, run, lease)
}
func (d *spyDriver) GetRun(ctx context.Context, id string) (driver.Run, []driver.Step, error) {
	d.check(ctx, "GetRun")
	return d.Driver.GetRun(ctx, id)
}
func (d *spyDriver) ListRuns(ctx context.Context, f driver.RunFilter, limit int) ([]driver.Run, error) {
	d.check(ctx, "ListRuns")
	return d.Driver.ListRuns(ctx, f, limit)
}
func (d *spyDriver) AcquireRun(ctx context.Context, id, owner string, lease time.Duration) (driver.Run, []driver.Step, error) {
	d.check(ctx, "AcquireRun")
	return d.Driver.AcquireRun(ctx, id, owner, lease)
}
func (d *spyDriver) RenewRun(ctx context.Context, id, owner string, lease time.Duration) error {
	d.check(ctx, "RenewRun")
	return d.Driver.RenewRun(ctx, id, owner, lease)
}
func (d *spyDriver) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	d.check(ctx, "SaveStep")
	return d.Driver.SaveStep(ctx, id, owner, step)
}
func (d *spyDriver) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	d.check(ctx, "FinishRun")
	return d.Driver.FinishRun(ctx, id, owner, f)
}
func (d *spyDriver) DueRuns(ctx context.Context, flows []string, limit int) ([]string, error) {
	d.check(ctx, "DueRuns")
	return d.Driver.DueRuns(ctx, flows, limit)
}
func (d *spyDriver) ClaimKey(ctx context.Context, key, runID string) (string, error) {
	d.check(ctx, "ClaimKey")
	return d.Driver.ClaimKey(ctx, key, runID)
}
func (d *spyDriver) SendSignal(ctx context.Context, s driver.Signal) (driver.Signal, error) {
	d.check(ctx, "SendSignal")
	return d.Driver.SendSignal(ctx, s)
}
func (d *spyDriver) TakeSignal(ctx context.Context, id, owner, name string, step driver.Step) (driver.Signal, bool, error) {
	d.check(ctx, "TakeSignal")
	return d.Driver.TakeSignal(ctx, id, owner, name, step)
}
func (d *spyDriver) WakeForSignal(ctx context.Context, id, name string) (bool, error) {
	d.check(ctx, "WakeForSignal")
	return d.Driver.WakeForSignal(ctx, id, name)
}
func (d *spyDriver) Signals(ctx context.Context, id string) ([]driver.Signal, error) {
	d.check(ctx, "Signals")
	return d.Driver.Signals(ctx, id)
}

// TestEveryStoreCallHasADeadline: issue 21 (3). Every call oke makes to its
// store — for a request, a durable run (steps, a business-key claim, a
// sleep, a signal, a child run, an event), the scheduler, the sweeper and
// the App's own methods — carries a deadline, so that a hung store fails
// each call after Config.StoreTimeout instead of holding its caller. The
// nemesis suite found oke.Claim's call without one: a refund that hung for
// as long as PostgreSQL did.
func TestEveryStoreCallHasADeadline(t *testing.T) {
	d := newSpyDriver()
	type in struct {
		N int `json:"n"`
	}
	var child *oke.Flow[in, int]
	child = oke.NewFlow("spy.child", oke.Options{Durable: true},
		func(ctx context.Context, v in, fx *oke.Fx) (oke.Response[int], error) {
			n, err := oke.Step(ctx, "double", func(context.Context) (int, error) { return 2 * v.N, nil })
			return oke.OK(n), err
		})
	app := newApp(t, oke.Config{Driver: d, PollInterval: 5 * time.Millisecond, SweepInterval: 5 * time.Millisecond}, func(app *oke.App) {
		app.Handle(oke.POST("/write"), oke.NewFlow("spy.write", oke.Options{},
			func(ctx context.Context, v in, fx *oke.Fx) (oke.Response[int], error) {
				return oke.Created(v.N, ""), fx.Raw(ctx, "write", func(context.Context) error { return nil })
			}))
		app.Handle(oke.POST("/durable"), oke.NewFlow("spy.durable", oke.Options{Durable: true},
			func(ctx context.Context, v in, fx *oke.Fx) (oke.Response[int], error) {
				won, err := oke.Claim(ctx, fmt.Sprintf("spy:%d", v.N))
				if err != nil || !won {
					return oke.Response[int]{}, fmt.Errorf("claim: won %v: %w", won, err)
				}
				id, err := oke.NewID(ctx, "id")
				if err != nil {
					return oke.Response[int]{}, err
				}
				if _, err := oke.Step(ctx, "start the child", func(ctx context.Context) (string, error) {
					return oke.Run(ctx, fx, child, v)
				}); err != nil {
					return oke.Response[int]{}, err
				}
				if _, err := oke.Step(ctx, "emit", func(ctx context.Context) (bool, error) {
					return true, fx.Emit(ctx, "spy.done", id)
				}); err != nil {
					return oke.Response[int]{}, err
				}
				if err := oke.Sleep(ctx, "nap", time.Millisecond); err != nil {
					return oke.Response[int]{}, err
				}
				got, ok, err := oke.AwaitSignal[int](ctx, "go", time.Hour)
				if err != nil || !ok {
					return oke.Response[int]{}, fmt.Errorf("signal: %v: %w", ok, err)
				}
				return oke.Created(got+v.N, ""), nil
			}))
		app.Handle(oke.POST("/sleepy"), oke.NewFlow("spy.sleepy", oke.Options{Durable: true},
			func(ctx context.Context, v in, fx *oke.Fx) (oke.Response[int], error) {
				return oke.OK(v.N), oke.Sleep(ctx, "an hour", time.Hour)
			}))
		app.Handle(oke.Internal(), child)
		app.Handle(oke.OnEvent("spy.done"), oke.NewFlow("spy.onDone", oke.Options{Durable: true},
			func(ctx context.Context, id string, fx *oke.Fx) (oke.Response[bool], error) {
				return oke.OK(true), nil
			}))
	})
	ctx := t.Context()

	// A keyed request, its replay, and an unkeyed one.
	for _, hdr := range [][]string{{"Idempotency-Key", "spy-key-0000000001"}, {"Idempotency-Key", "spy-key-0000000001"}, nil} {
		if w := do(app, "POST", "/write", `{"n":1}`, hdr...); w.Code != 201 {
			t.Fatalf("POST /write: %d %s", w.Code, w.Body)
		}
	}
	// A durable run through every kind of call, woken by a signal (its
	// key stores the parked 204, which a retry replays).
	if w := do(app, "POST", "/durable", `{"n":2}`, "Idempotency-Key", "spy-key-0000000002"); w.Code >= 300 && w.Code != 204 {
		t.Fatalf("POST /durable: %d %s", w.Code, w.Body)
	}
	runs, err := app.Journal().ListRuns(context.Background(), driver.RunFilter{Flow: "spy.durable"}, 0)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of spy.durable: %v %v", runs, err)
	}
	id := runs[0].ID
	if err := app.Signal(ctx, id, "go", 40); err != nil {
		t.Fatal(err)
	}
	res, err := app.AwaitRun(ctx, id)
	if err != nil {
		t.Fatalf("AwaitRun: %v", err)
	}
	if res.Status != 201 {
		t.Fatalf("the run ended %d %s", res.Status, res.Body)
	}
	if w := do(app, "POST", "/durable", `{"n":2}`, "Idempotency-Key", "spy-key-0000000002"); w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the key's replay: %d %v %s", w.Code, w.Header(), w.Body)
	}
	// The App's own methods.
	if _, err := app.Signals(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Replay(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := app.ReplayFrom(ctx, id, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Resume(ctx, id); !errors.Is(err, driver.ErrRunNotDead) {
		t.Fatalf("Resume of a completed run: %v, want driver.ErrRunNotDead", err)
	}
	if w := do(app, "POST", "/sleepy", `{"n":3}`); w.Code != 204 {
		t.Fatalf("POST /sleepy: %d %s", w.Code, w.Body)
	}
	sleepy, err := app.Journal().ListRuns(context.Background(), driver.RunFilter{Flow: "spy.sleepy"}, 0)
	if err != nil || len(sleepy) != 1 {
		t.Fatalf("runs of spy.sleepy: %v %v", sleepy, err)
	}
	if _, err := app.Cancel(ctx, sleepy[0].ID); err != nil {
		t.Fatalf("Cancel of a sleeping run: %v", err)
	}
	if _, err := app.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Schedules(ctx); err != nil {
		t.Fatal(err)
	}
	// The admin API (the console's and the CLI's -addr), on every route
	// that reads or changes the store.
	h := admin.Handler(app, admin.InsecureNoAuth)
	var found admin.RowsPage
	if w := do(h, "GET", "/idempotency?key=spy-key-0000000001", ""); w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &found) != nil || len(found.Rows) != 1 {
		t.Fatalf("GET /idempotency?key=: %d %s", w.Code, w.Body)
	}
	f := found.Rows[0]
	row := url.Values{"tenant": {f.Tenant}, "principal": {f.Principal}, "flow": {f.Flow}, "key": {f.Key}}.Encode()
	for _, c := range []struct{ method, path string }{
		{"GET", "/runs"}, {"GET", "/runs/" + id}, {"GET", "/idempotency"}, {"GET", "/idempotency?key=spy-key-0000000001"},
		{"GET", "/idempotency/row?" + row}, {"DELETE", "/idempotency/row?" + row}, {"POST", "/idempotency/sweep"},
		{"POST", "/runs/" + id + "/replay"}, {"GET", "/schedules"},
	} {
		if w := do(h, c.method, c.path, "", "Content-Type", "application/json"); w.Code >= 300 {
			t.Errorf("%s %s: %d %s", c.method, c.path, w.Code, w.Body)
		}
	}
	app.Close(context.Background())
	d.report(t)
}
