package drivertest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver"
)

// The rules of results by key (oke's results.go): a durable flow's parked
// 204 names its run (Oke-Run-Id); a retry with the same key replays the 204
// as spec 004 says, and with Prefer: wait=N gets the run's final response
// once the run has ended.
func init() {
	durableRules = append(durableRules,
		rowRule{"ParkedAnswerNamesItsRunAndPreferWaitGetsTheFinalResponse", testParkedFinalResponse},
		rowRule{"PreferWaitOnAParkedRunEndsAfterNWithThe204", testParkedWaitExpires},
		rowRule{"PreferWaitOnAParkedRunEndsWhenTheClientLeaves", testParkedWaitClientLeaves},
		rowRule{"PreferWaitOnAParkedRunEndsWhenTheAppCloses", testParkedWaitAppCloses},
		rowRule{"DurableNoContentAnswerNamesNoRun", testDurableNoContentFinal},
		rowRule{"AwaitRunReturnsTheResultOrATypedError", testAwaitRun},
	)
	httpRules = append(httpRules,
		rowRule{"PreferWaitOnAKeyInProgressEndsWhenTheAppCloses", testPreferWaitAppCloses})
}

func testPreferWaitAppCloses(t *testing.T, d driver.Driver) {
	release, started := make(chan struct{}), make(chan struct{})
	h := newHarness(t, d, oke.Config{}, func(h *harness, app *oke.App) {
		app.Handle(oke.POST("/slow"), oke.NewFlow("t.slowclose", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[int], error) {
				fx.Raw(ctx, "write", func(context.Context) error { return nil })
				close(started)
				<-release
				return oke.Created(1, ""), nil
			}))
	})
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- h.req("POST", "/slow", body, "Idempotency-Key", key1) }()
	waitFor(t, "the flow to start", started)
	held := make(chan *httptest.ResponseRecorder)
	go func() { held <- h.req("POST", "/slow", body, "Idempotency-Key", key1, "Prefer", "wait=60") }()
	eventually(t, "the second request to be held", func() bool { return waiting(t, h.app, "t.slowclose") == 1 })
	closed := make(chan error, 1)
	go func() { closed <- h.app.Close(context.Background()) }()
	// Close waits for the first request, which runs until released: the
	// held one (for up to 60 s) must not wait with it.
	eventually(t, "the held request to end with the app", func() bool { return waiting(t, h.app, "t.slowclose") == 0 })
	wantCode(t, "the held request when the app closes", waitFor(t, "the held request", held), 409, "IdempotencyInProgress")
	close(release)
	if f := waitFor(t, "the first request", first); f.Code != 201 {
		t.Fatalf("first: %d %s", f.Code, f.Body)
	}
	if err := waitFor(t, "Close", closed); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// CancelRun passes App.Cancel on to the driver's journal.
func (j *journalFault) CancelRun(ctx context.Context, id string, result driver.Response, msg string) (driver.Run, error) {
	c, ok := j.Journal.(driver.RunCanceller)
	if !ok {
		return driver.Run{}, errors.ErrUnsupported
	}
	return c.CancelRun(ctx, id, result, msg)
}

// sleeper binds POST /nap: a durable flow that sleeps for d, then runs step
// "after" (which waits for gate when it is not nil) and answers 201 with a
// body and a Location.
func sleeper(d time.Duration, gate chan struct{}) func(h *durableHarness, app *oke.App) {
	return func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/nap"), oke.NewFlow("t.nap", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				if _, err := step(h, ctx, "before", func(context.Context) (int, error) { return 1, nil }); err != nil {
					return oke.Response[string]{}, err
				}
				if err := oke.Sleep(ctx, "nap", d); err != nil {
					return oke.Response[string]{}, err
				}
				if _, err := step(h, ctx, "after", func(context.Context) (int, error) {
					if gate != nil {
						<-gate
					}
					return 2, nil
				}); err != nil {
					return oke.Response[string]{}, err
				}
				return oke.Created("woke:"+in.Tag, "/naps/"+in.Tag), nil
			}))
	}
}

// parked posts to /nap with key1 and checks the 204 that names the run; it
// returns the run's ID.
func parked(t *testing.T, h *durableHarness) string {
	t.Helper()
	w := h.req("POST", "/nap", `{"tag":"z"}`, "Idempotency-Key", key1)
	id := w.Header().Get(oke.HeaderRunID)
	if w.Code != 204 || w.Body.Len() != 0 || replayed(w) || !strings.HasPrefix(id, "run_") {
		t.Fatalf("a durable sleep: %d %q replayed=%v %s=%q; want 204 at once, naming its run", w.Code, w.Body, replayed(w), oke.HeaderRunID, id)
	}
	if runs := h.runsOf("t.nap"); len(runs) != 1 || runs[0].ID != id {
		t.Fatalf("the 204 names run %s; the journal holds %v", id, runs)
	}
	return id
}

// napAgain retries POST /nap with key1 and the headers hdr.
func (h *durableHarness) napAgain(hdr ...string) *httptest.ResponseRecorder {
	return h.req("POST", "/nap", `{"tag":"z"}`, append([]string{"Idempotency-Key", key1}, hdr...)...)
}

// wantParked checks a replayed 204 that names run id.
func wantParked(t *testing.T, what string, w *httptest.ResponseRecorder, id string) {
	t.Helper()
	if w.Code != 204 || w.Body.Len() != 0 || !replayed(w) || w.Header().Get(oke.HeaderRunID) != id {
		t.Fatalf("%s: %d %q replayed=%v %s=%q; want the replayed 204 naming run %s",
			what, w.Code, w.Body, replayed(w), oke.HeaderRunID, w.Header().Get(oke.HeaderRunID), id)
	}
}

// wantFinal checks the run's final response of the sleeper flow.
func wantFinal(t *testing.T, what string, w *httptest.ResponseRecorder, applied string) {
	t.Helper()
	if w.Code != 201 || w.Body.String() != "\"woke:z\"\n" || w.Header().Get("Content-Type") != "application/json" ||
		w.Header().Get("Location") != "/naps/z" || !replayed(w) || w.Header().Get(oke.HeaderRunID) != "" ||
		w.Header().Get("Preference-Applied") != applied {
		t.Fatalf("%s: %d %q %v; want the run's 201 \"woke:z\" with Location /naps/z, Idempotent-Replayed, Preference-Applied %s and no %s",
			what, w.Code, w.Body, w.Header(), applied, oke.HeaderRunID)
	}
}

func testParkedFinalResponse(t *testing.T, d driver.Driver) {
	gate := make(chan struct{})
	h := newDurable(t, d, oke.Config{}, sleeper(nap, gate))
	id := parked(t, h)
	wantParked(t, "a plain retry", h.napAgain(), id)

	held := make(chan *httptest.ResponseRecorder)
	go func() { held <- h.napAgain("Prefer", "wait=30") }()
	eventually(t, "the retry to be held", func() bool { return waiting(t, h.app, "t.nap") == 1 })
	close(gate) // the run's last step may end now
	wantFinal(t, "the held retry", waitFor(t, "the held retry", held), "wait=30")

	// Once the run has ended: its response at once with any wait; the 204
	// without one (spec 004), still naming the run.
	wantFinal(t, "a retry with Prefer after the end", h.napAgain("Prefer", "wait=5"), "wait=5")
	wantParked(t, "a plain retry after the end", h.napAgain(), id)
	if h.ranStep("before") != 1 || h.ranStep("after") != 1 {
		t.Fatalf("before ran %d, after ran %d; want 1 and 1", h.ranStep("before"), h.ranStep("after"))
	}
	// Another principal's key is another scope: it starts its own run.
	other := h.req("POST", "/nap", `{"tag":"z"}`, "Idempotency-Key", key1, "Authorization", "Bearer user:eve", "Prefer", "wait=1")
	if other.Code != 204 || replayed(other) || other.Header().Get(oke.HeaderRunID) == id {
		t.Fatalf("another principal with the same key: %d replayed=%v %v; want a 204 of a run of its own", other.Code, replayed(other), other.Header())
	}
}

func testParkedWaitExpires(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, sleeper(time.Hour, nil))
	id := parked(t, h)
	w := h.napAgain("Prefer", "wait=1")
	wantParked(t, "a retry whose wait ends first", w, id)
	if got := w.Header().Get("Preference-Applied"); got != "wait=1" {
		t.Fatalf("Preference-Applied %q, want wait=1", got)
	}
}

func testParkedWaitClientLeaves(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, sleeper(time.Hour, nil))
	id := parked(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan *httptest.ResponseRecorder)
	go func() {
		r := httptest.NewRequest("POST", "/nap", strings.NewReader(`{"tag":"z"}`)).WithContext(ctx)
		r.Header.Set("Idempotency-Key", key1)
		r.Header.Set("Prefer", "wait=60")
		w := httptest.NewRecorder()
		h.app.ServeHTTP(w, r)
		held <- w
	}()
	eventually(t, "the retry to be held", func() bool { return waiting(t, h.app, "t.nap") == 1 })
	cancel()
	// The run sleeps for an hour and the wait is 60 s: only the client's
	// leaving ends the wait now.
	eventually(t, "the wait to end with the client", func() bool { return waiting(t, h.app, "t.nap") == 0 })
	wantParked(t, "the retry whose client left", waitFor(t, "the held retry", held), id)
}

func testParkedWaitAppCloses(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, sleeper(time.Hour, nil))
	id := parked(t, h)
	held := make(chan *httptest.ResponseRecorder)
	go func() { held <- h.napAgain("Prefer", "wait=60") }()
	eventually(t, "the retry to be held", func() bool { return waiting(t, h.app, "t.nap") == 1 })
	closed := make(chan error, 1)
	go func() { closed <- h.app.Close(context.Background()) }()
	eventually(t, "the held retry to end with the app", func() bool { return waiting(t, h.app, "t.nap") == 0 })
	wantParked(t, "the retry held while the app closes", waitFor(t, "the held retry", held), id)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testDurableNoContentFinal(t *testing.T, d driver.Driver) {
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		app.Handle(oke.POST("/done"), oke.NewFlow("t.done", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[struct{}], error) {
				_, err := step(h, ctx, "only", func(context.Context) (int, error) { return 1, nil })
				return oke.NoContent[struct{}](), err
			}))
	})
	for _, c := range []struct {
		what string
		hdr  []string
	}{
		{"the first answer", nil},
		{"a plain retry", nil},
		{"a retry with Prefer", []string{"Prefer", "wait=5"}},
	} {
		w := h.req("POST", "/done", `{"tag":"d"}`, append([]string{"Idempotency-Key", key1}, c.hdr...)...)
		if w.Code != 204 || w.Header().Get(oke.HeaderRunID) != "" {
			t.Fatalf("%s: %d %v; want 204 naming no run (it is the run's final answer)", c.what, w.Code, w.Header())
		}
	}
}

func testAwaitRun(t *testing.T, d driver.Driver) {
	gate := make(chan struct{})
	nap := sleeper(nap, gate)
	h := newDurable(t, d, oke.Config{}, func(h *durableHarness, app *oke.App) {
		nap(h, app)
		app.Handle(oke.POST("/long"), oke.NewFlow("t.long", oke.Options{Durable: true},
			func(ctx context.Context, in pipeIn, fx *oke.Fx) (oke.Response[string], error) {
				if err := oke.Sleep(ctx, "an hour", time.Hour); err != nil {
					return oke.Response[string]{}, err
				}
				return oke.OK("late"), nil
			}))
	})
	id := parked(t, h)
	ctx := context.Background()

	t.Run("unknown run", func(t *testing.T) {
		_, err := h.app.AwaitRun(ctx, "run_nosuch")
		if !errors.Is(err, oke.ErrRunNotFound) || !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("AwaitRun of an unknown run: %v; want oke.ErrRunNotFound", err)
		}
	})
	t.Run("context ends first", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := h.app.AwaitRun(c, id); !errors.Is(err, context.Canceled) {
			t.Fatalf("AwaitRun with an ended context: %v; want context.Canceled", err)
		}
	})
	got := make(chan error, 1)
	var res oke.RunResult
	go func() {
		var err error
		res, err = h.app.AwaitRun(ctx, id)
		got <- err
	}()
	close(gate)
	if err := waitFor(t, "AwaitRun", got); err != nil {
		t.Fatalf("AwaitRun: %v", err)
	}
	var out string
	if err := res.Decode(&out); err != nil || res.Status != 201 || res.Location != "/naps/z" || out != "woke:z" || res.RunID != id || res.Flow != "t.nap" {
		t.Fatalf("AwaitRun: %+v decoded %q (%v); want the run's 201 \"woke:z\"", res, out, err)
	}

	t.Run("a cancelled run is a RunFailedError", func(t *testing.T) {
		w := h.req("POST", "/long", `{"tag":"c"}`, "Idempotency-Key", key2)
		long := w.Header().Get(oke.HeaderRunID)
		if w.Code != 204 || long == "" {
			t.Fatalf("second run: %d %v", w.Code, w.Header())
		}
		// A run that sleeps for an hour: cancel it while AwaitRun waits.
		got := make(chan error, 1)
		go func() { _, err := h.app.AwaitRun(ctx, long); got <- err }()
		if _, err := h.app.Cancel(ctx, long); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		err := waitFor(t, "AwaitRun of the cancelled run", got)
		var rf *oke.RunFailedError
		if !errors.As(err, &rf) || !errors.Is(err, oke.ErrRunCancelled) || rf.RunID != long || rf.Result.Status != http.StatusConflict {
			t.Fatalf("AwaitRun of a cancelled run: %v; want a *RunFailedError matching ErrRunCancelled", err)
		}
		// By key, the cancel is the final response too.
		w = h.req("POST", "/long", `{"tag":"c"}`, "Idempotency-Key", key2, "Prefer", "wait=5")
		wantCode(t, "a retry of the cancelled run with Prefer", w, 409, "RunCancelled")
	})
}
