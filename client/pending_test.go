package client

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// parkedReply is a durable run's parked answer: 204 naming run_1.
var parkedReply = jsonReply(http.StatusNoContent, nil, HeaderRunID, "run_1", HeaderReplayed, "true")

// fakeClock is a clock for the client that the sleep hook and a server that
// "holds" requests advance.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// onClock makes f's client read clk, and its sleeps advance it.
func onClock(f *fixture, clk *fakeClock) {
	sleep := f.c.sleep
	f.c.now = clk.now
	f.c.sleep = func(ctx context.Context, d time.Duration) error {
		clk.advance(d)
		return sleep(ctx, d)
	}
}

// holds answers like a server that held the request for its Prefer: wait=N
// (it advances clk by N) and then answers with next, saying
// Preference-Applied.
func holds(clk *fakeClock, next reply) reply {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		v, ok := strings.CutPrefix(r.Header.Get(HeaderPrefer), "wait=")
		if secs, err := strconv.Atoi(v); ok && err == nil {
			clk.advance(time.Duration(secs) * time.Second)
			w.Header().Set(HeaderPreferenceApplied, "wait="+v)
		}
		next(n, w, r)
	}
}

func prefers(reqs []seen) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Header.Get(HeaderPrefer))
	}
	return out
}

func TestParkedAnswerIsErrPending(t *testing.T) {
	f := setup(t, parkedReply, WithRetry(Retry{MaxAttempts: 3}))
	out, meta, err := post.Call(context.Background(), f.c, in1000)
	var pe *PendingError
	if !errors.Is(err, ErrPending) || !errors.As(err, &pe) || pe.RunID != "run_1" || pe.IdempotencyKey != meta.IdempotencyKey || pe.IdempotencyKey == "" {
		t.Fatalf("a parked 204: %v; want a *PendingError naming run_1 and the key", err)
	}
	if !meta.Pending || meta.RunID != "run_1" || meta.Status != 204 || meta.Attempts != 1 || out != (charge{}) {
		t.Fatalf("meta %+v, out %+v; want Pending, RunID run_1, one attempt", meta, out)
	}
	if !strings.Contains(err.Error(), "client.Wait") {
		t.Fatalf("the error %q does not say how to get the result", err)
	}
	// Do hands the answer over as it came.
	resp, err := f.c.Do(context.Background(), "POST", "/charges", []byte(`{}`))
	if err != nil || !resp.Pending || resp.RunID != "run_1" {
		t.Fatalf("Do: %+v, %v; want the parked answer with a nil error", resp, err)
	}
	// A plain 204 (no run named) is a success.
	g := setup(t, jsonReply(http.StatusNoContent, nil))
	if _, meta, err := post.Call(context.Background(), g.c, in1000); err != nil || meta.Pending {
		t.Fatalf("a plain 204: %+v, %v; want success", meta, err)
	}
}

func TestWaitSendsAgainWithTheSameKeyUntilTheFinalAnswer(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	final := jsonReply(http.StatusCreated, map[string]any{"id": "ch_1", "amount": 1000}, HeaderReplayed, "true")
	f := setup(t, script(parkedReply, holds(clk, final)))
	onClock(f, clk)
	out, meta, err := post.Call(context.Background(), f.c, in1000, Wait(30*time.Second))
	if err != nil || out.ID != "ch_1" || meta.Pending || !meta.Waited || !meta.IdempotentReplayed || meta.Attempts != 2 {
		t.Fatalf("Wait: %+v, %+v, %v; want the final 201 after two attempts, waited", out, meta, err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[0].Key == "" || reqs[1].Key != reqs[0].Key {
		t.Fatalf("requests %+v; want two with one key", reqs)
	}
	// The first answer was not held: the second attempt waited a backoff
	// (100ms·0.75), and asked for what was left.
	if got := prefers(reqs); !slices.Equal(got, []string{"wait=30", "wait=29"}) {
		t.Fatalf("Prefer headers %q, want wait=30 then wait=29", got)
	}
	if got := f.slept(); !slices.Equal(got, []time.Duration{75 * time.Millisecond}) {
		t.Fatalf("slept %v, want one backoff of 75ms", got)
	}
}

func TestWaitGivesUpAfterItsDurationWithErrPending(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	f := setup(t, holds(clk, parkedReply))
	onClock(f, clk)
	_, meta, err := post.Call(context.Background(), f.c, in1000, Wait(90*time.Second))
	if !errors.Is(err, ErrPending) || !meta.Pending || meta.Attempts != 2 {
		t.Fatalf("a run that outlasts the wait: %+v, %v; want ErrPending after two attempts", meta, err)
	}
	if got := prefers(f.requests()); !slices.Equal(got, []string{"wait=60", "wait=30"}) {
		t.Fatalf("Prefer headers %q, want wait=60 (the most) then the 30 s left", got)
	}
	if len(f.slept()) != 0 {
		t.Fatalf("slept %v between held attempts, want no sleep", f.slept())
	}
}

func TestWaitWithoutAKeySendsOnce(t *testing.T) {
	f := setup(t, parkedReply)
	_, _, err := post.Call(context.Background(), f.c, in1000, NoKey(), Wait(time.Minute))
	var pe *PendingError
	if !errors.As(err, &pe) || pe.IdempotencyKey != "" || len(f.requests()) != 1 || !strings.Contains(err.Error(), "no Idempotency-Key") {
		t.Fatalf("no key: %v after %d requests; want ErrPending after one, saying no key reaches the result", err, len(f.requests()))
	}
	if _, _, err := post.Call(context.Background(), f.c, in1000, Wait(0)); err == nil || len(f.requests()) != 1 {
		t.Fatalf("Wait(0): %v; want an error before sending", err)
	}
}

func TestWaitEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := setup(t, parkedReply)
	f.c.sleep = func(ctx context.Context, d time.Duration) error {
		cancel() // the caller gives up while the run is parked
		return ctx.Err()
	}
	_, meta, err := post.Call(ctx, f.c, in1000, Wait(time.Minute))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrPending) || !meta.Pending || len(f.requests()) != 1 {
		t.Fatalf("ctx ended: %+v, %v after %d requests; want context.Canceled and ErrPending after one", meta, err, len(f.requests()))
	}
}
