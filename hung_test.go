package oke_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/memory"
)

// hungDriver is a memory driver whose chosen primitives hang, as on a
// store that stopped answering (a SIGSTOPped Postgres): a hung call
// returns only when its context ends. A call with no deadline would hang
// for as long as the store does; it fails the test instead (noDeadline) and
// returns at once, so that a missing deadline is a failure, not a hang.
type hungDriver struct {
	*memory.Driver
	hang sync.Map // primitive name → true: hangs

	mu         sync.Mutex
	inside     int           // hung calls in progress
	entered    chan string   // a hung call began (its primitive's name)
	release    chan struct{} // closed: hung calls return as the store would
	noDeadline []string      // primitives called with no deadline
	// most: hung calls beyond it at once fail at once (over counts them),
	// so that a backlog the app should have shed is a failure, not a hang.
	most, over int
	// anyCtx: hung calls with no deadline hang too (until released).
	anyCtx bool
}

func newHungDriver() *hungDriver {
	return &hungDriver{Driver: memory.New(), entered: make(chan string, 1024), release: make(chan struct{})}
}

func (d *hungDriver) set(ops ...string) {
	d.hang.Clear()
	for _, op := range ops {
		d.hang.Store(op, true)
	}
}

// hung makes the call op hang when it is set to, until ctx ends (its error
// is returned) or the store comes back (release: nil, the call goes on).
func (d *hungDriver) hung(ctx context.Context, op string) error {
	if _, ok := d.hang.Load(op); !ok {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok && !d.anyCtx {
		d.mu.Lock()
		d.noDeadline = append(d.noDeadline, op)
		d.mu.Unlock()
		return fmt.Errorf("test: %s called with no deadline: %w", op, driver.ErrUnavailable)
	}
	d.mu.Lock()
	if d.most > 0 && d.inside >= d.most {
		d.over++
		d.mu.Unlock()
		return fmt.Errorf("test: more than %d store calls at once: %w", d.most, driver.ErrUnavailable)
	}
	d.inside++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inside--
		d.mu.Unlock()
	}()
	d.entered <- op
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.release:
		return nil
	}
}

func (d *hungDriver) Claim(ctx context.Context, r driver.ClaimRequest) (driver.ClaimResult, error) {
	if err := d.hung(ctx, "Claim"); err != nil {
		return driver.ClaimResult{}, err
	}
	return d.Driver.Claim(ctx, r)
}

func (d *hungDriver) Complete(ctx context.Context, k driver.Key, owner string, resp driver.Response, ttl time.Duration) error {
	if err := d.hung(ctx, "Complete"); err != nil {
		return err
	}
	return d.Driver.Complete(ctx, k, owner, resp, ttl)
}

func (d *hungDriver) Release(ctx context.Context, k driver.Key, owner string) error {
	if err := d.hung(ctx, "Release"); err != nil {
		return err
	}
	return d.Driver.Release(ctx, k, owner)
}

func (d *hungDriver) Get(ctx context.Context, k driver.Key) (driver.Row, error) {
	if err := d.hung(ctx, "Get"); err != nil {
		return driver.Row{}, err
	}
	return d.Driver.Get(ctx, k)
}

func (d *hungDriver) CreateRun(ctx context.Context, run driver.Run, lease time.Duration) (driver.Run, error) {
	if err := d.hung(ctx, "CreateRun"); err != nil {
		return driver.Run{}, err
	}
	return d.Driver.CreateRun(ctx, run, lease)
}

func (d *hungDriver) SaveStep(ctx context.Context, id, owner string, step driver.Step) error {
	if err := d.hung(ctx, "SaveStep"); err != nil {
		return err
	}
	return d.Driver.SaveStep(ctx, id, owner, step)
}

func (d *hungDriver) FinishRun(ctx context.Context, id, owner string, f driver.Finish) error {
	if err := d.hung(ctx, "FinishRun"); err != nil {
		return err
	}
	return d.Driver.FinishRun(ctx, id, owner, f)
}

func (d *hungDriver) checkDeadlines(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.noDeadline) > 0 {
		t.Fatalf("store calls with no deadline: %v (a hung store would hold these requests for as long as it hangs)", d.noDeadline)
	}
}

// TestHungStoreAnswers503: issue 21 (3), Config.StoreTimeout. A store that
// stops answering fails each of oke's calls to it at its deadline, and the
// request is answered then, honestly: 503 StoreUnavailable when nothing of
// the flow ran, OutcomeUnknown when it may have, both with Retry-After —
// never a request held for as long as the store hangs.
func TestHungStoreAnswers503(t *testing.T) {
	d := newHungDriver()
	var runs atomic.Int64
	app := newApp(t, oke.Config{Driver: d, StoreTimeout: 20 * time.Millisecond, PollInterval: -1}, func(app *oke.App) {
		app.Handle(oke.POST("/write"), oke.NewFlow("hung.write", oke.Options{},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				runs.Add(1)
				return oke.Created(in.Amount, ""), fx.Raw(ctx, "write", func(context.Context) error { return nil })
			}))
		app.Handle(oke.POST("/steps"), oke.NewFlow("hung.steps", oke.Options{Durable: true},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				runs.Add(1)
				n, err := oke.Step(ctx, "one", func(context.Context) (int64, error) { return in.Amount, nil })
				return oke.Created(n, ""), err
			}))
	})
	for _, tc := range []struct {
		name string
		hang []string
		path string
		key  bool
		code string
		ran  int64
	}{
		{"the claim hangs: not run", []string{"Claim"}, "/write", true, "StoreUnavailable", 0},
		{"the completion hangs: outcome unknown", []string{"Complete"}, "/write", true, "OutcomeUnknown", 1},
		{"a durable run's creation hangs: not run", []string{"CreateRun"}, "/steps", true, "StoreUnavailable", 0},
		{"the same without a key", []string{"CreateRun"}, "/steps", false, "StoreUnavailable", 0},
		{"a durable step's save hangs: outcome unknown", []string{"SaveStep", "FinishRun"}, "/steps", true, "OutcomeUnknown", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.set(tc.hang...)
			defer d.set()
			before := runs.Load()
			hdr := []string{}
			if tc.key {
				hdr = []string{"Idempotency-Key", "hung-" + strings.ReplaceAll(tc.name, " ", "-")}
			}
			w := do(app, "POST", tc.path, `{"amount":1}`, hdr...)
			d.checkDeadlines(t)
			if w.Code != 503 || !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`) || w.Header().Get("Retry-After") == "" {
				t.Fatalf("%d %v %s, want 503 %s with Retry-After", w.Code, w.Header(), w.Body, tc.code)
			}
			if got := runs.Load() - before; got != tc.ran {
				t.Fatalf("the function ran %d times, want %d", got, tc.ran)
			}
		})
	}
}

// TestHungStoreSheds: issue 21 (3), Config.MaxInFlight. With MaxInFlight
// requests held by a hung store, the next one is answered at once — 503
// StoreUnavailable with Retry-After, not run, counted in
// oke_requests_shed_total — instead of joining the backlog: the store never
// sees more than MaxInFlight calls at once, however many requests come.
// Once the store answers again, the held requests finish as usual.
func TestHungStoreSheds(t *testing.T) {
	const limit = 3
	d := newHungDriver()
	d.set("Claim")
	d.most, d.anyCtx = limit, true
	var runs atomic.Int64
	// A store deadline that never comes in the test: the hung calls
	// return when released; only the limit keeps the backlog out.
	app := newApp(t, oke.Config{Driver: d, MaxInFlight: limit, StoreTimeout: time.Hour}, func(app *oke.App) {
		app.Handle(oke.POST("/write"), oke.NewFlow("shed.write", oke.Options{},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				runs.Add(1)
				return oke.Created(in.Amount, ""), nil
			}))
	})
	held := make(chan int, limit)
	for i := range limit {
		go func() {
			held <- do(app, "POST", "/write", `{"amount":1}`, "Idempotency-Key", fmt.Sprintf("shed-held-key-%04d", i)).Code
		}()
	}
	for range limit {
		<-d.entered
	}
	for i := range 2 * limit {
		w := do(app, "POST", "/write", `{"amount":1}`, "Idempotency-Key", fmt.Sprintf("shed-more-key-%04d", i))
		if w.Code != 503 || !strings.Contains(w.Body.String(), `"code":"StoreUnavailable"`) || w.Header().Get("Retry-After") == "" {
			t.Fatalf("request %d past the limit: %d %v %s, want 503 StoreUnavailable with Retry-After at once", limit+i+1, w.Code, w.Header(), w.Body)
		}
	}
	close(d.release)
	for range limit {
		if code := <-held; code != 201 {
			t.Fatalf("a held request, once the store answered: %d, want 201", code)
		}
	}
	if d.over > 0 {
		t.Fatalf("%d store calls came beyond MaxInFlight = %d in progress at once: the requests past the limit were not shed", d.over, limit)
	}
	if got := runs.Load(); got != limit {
		t.Fatalf("the function ran %d times, want %d (the shed requests were not run)", got, limit)
	}
	metrics := do(app.MetricsHandler(), "GET", "/metrics", "").Body.String()
	if want := fmt.Sprintf(`oke_requests_shed_total{flow="shed.write"} %d`, 2*limit); !strings.Contains(metrics, want) {
		t.Fatalf("metrics lack %s", want)
	}
}
