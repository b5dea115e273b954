package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// retry3 is a policy with room for three attempts and a known backoff.
var retry3 = WithRetry(Retry{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second})

func TestRetriesKeepKeyAndBody(t *testing.T) {
	tests := []struct {
		name  string
		first reply
	}{
		{"409 IdempotencyInProgress", inProgress},
		{"500", envelope(http.StatusInternalServerError, "InternalError", "boom")},
		{"502 with an HTML body", func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		}},
		{"503", unavailable},
		{"503 StoreUnavailable", envelope(http.StatusServiceUnavailable, CodeStoreUnavailable, "not run")},
		{"503 OutcomeUnknown", envelope(http.StatusServiceUnavailable, CodeOutcomeUnknown, "may have run")},
		{"503 Unavailable", envelope(http.StatusServiceUnavailable, CodeUnavailable, "nothing changed")},
		{"504", envelope(http.StatusGatewayTimeout, "Timeout", "slow")},
		{"network error", hangUp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, script(tt.first, tt.first, created), retry3, WithHTTPClient(noKeepAlive()))
			got, meta, err := post.Call(context.Background(), f.c, in1000)
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got.ID != "ch_1" || meta.Status != http.StatusCreated || meta.Location != "/charges/ch_1" {
				t.Errorf("got %+v, meta %+v", got, meta)
			}
			reqs := f.requests()
			if len(reqs) != 3 || meta.Attempts != 3 {
				t.Fatalf("server saw %d requests, Meta.Attempts = %d, want 3", len(reqs), meta.Attempts)
			}
			for i, r := range reqs {
				if r.Key == "" || r.Key != meta.IdempotencyKey {
					t.Errorf("attempt %d: key %q, want the call's one key %q", i+1, r.Key, meta.IdempotencyKey)
				}
				if r.Body != in1000JSON {
					t.Errorf("attempt %d: body %q, want %q (rewound, identical)", i+1, r.Body, in1000JSON)
				}
			}
		})
	}
}

// TestOutcomeUnknownMatchesItsSentinel: a caller that gave up can tell "may
// have run" (retry later with the same key) from "did not run".
func TestOutcomeUnknownMatchesItsSentinel(t *testing.T) {
	f := setup(t, script(envelope(http.StatusServiceUnavailable, CodeOutcomeUnknown, "may have run")))
	_, _, err := post.Call(context.Background(), f.c, in1000)
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown only", err)
	}
	var e *Error
	if !errors.As(err, &e) || !e.Retryable() {
		t.Fatalf("err = %v, want a retryable *Error", err)
	}
}

func TestRetryIsOffByDefault(t *testing.T) {
	f := setup(t, script(unavailable, created))
	_, meta, err := post.Call(context.Background(), f.c, in1000)
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want the 503 *Error", err)
	}
	if n := len(f.requests()); n != 1 || meta.Attempts != 1 {
		t.Fatalf("server saw %d requests, Meta.Attempts %d, want 1", n, meta.Attempts)
	}
}

func TestNeverRetried(t *testing.T) {
	tests := []struct {
		name   string
		reply  reply
		status int
		is     error
	}{
		{"422 IdempotencyKeyReused", envelope(422, CodeKeyReused, ErrKeyReused.Message), 422, ErrKeyReused},
		{"400 IdempotencyKeyMissing", envelope(400, CodeKeyMissing, ErrKeyMissing.Message), 400, ErrKeyMissing},
		{"400 IdempotencyKeyInvalid", envelope(400, CodeKeyInvalid, ErrKeyInvalid.Message), 400, ErrKeyInvalid},
		{"400 validation", envelope(400, "InvalidInput", "amount must be > 0"), 400, nil},
		{"401", envelope(401, "Unauthorized", "bad token"), 401, nil},
		{"403", envelope(403, "Forbidden", "no"), 403, nil},
		{"404", envelope(404, "NotFound", "no such charge"), 404, nil},
		{"409 with another code", envelope(409, "Conflict", "state conflict", "Retry-After", "1"), 409, nil},
		{"429 with Retry-After", envelope(429, "RateLimited", "slow down", "Retry-After", "1"), 429, nil},
		{"replayed 500 (stored failure)", envelope(500, "InternalError", "stored", HeaderReplayed, "true"), 500, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, script(tt.reply, created), WithRetry(Retry{MaxAttempts: 5}))
			_, meta, err := post.Call(context.Background(), f.c, in1000)
			var e *Error
			if !errors.As(err, &e) || e.Status != tt.status {
				t.Fatalf("err = %v, want an *Error with status %d", err, tt.status)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if e.Retryable() {
				t.Errorf("Retryable() = true")
			}
			if n := len(f.requests()); n != 1 || meta.Attempts != 1 || len(f.slept()) != 0 {
				t.Fatalf("server saw %d requests (Meta.Attempts %d, waits %v), want 1 and no wait", n, meta.Attempts, f.slept())
			}
		})
	}
}

func TestRetryWithoutKeyOnlyForIdempotentMethods(t *testing.T) {
	tests := []struct {
		method string
		want   int // attempts
	}{
		{http.MethodPost, 1},
		{http.MethodPatch, 1},
		{http.MethodPut, 3},
		{http.MethodDelete, 3},
		{"QUERY", 3},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			f := setup(t, unavailable, retry3)
			_, meta, err := Call[chargeIn, charge](context.Background(), f.c, tt.method, "/charges", in1000, NoKey())
			if !errors.Is(err, &Error{Status: 503}) {
				t.Fatalf("err = %v, want 503", err)
			}
			if n := len(f.requests()); n != tt.want || meta.Attempts != tt.want {
				t.Fatalf("NoKey %s: %d attempts (Meta %d), want %d", tt.method, n, meta.Attempts, tt.want)
			}
		})
	}
}

func TestGETRetried(t *testing.T) {
	f := setup(t, script(unavailable, jsonReply(200, charge{ID: "ch_1"})), retry3)
	got, meta, err := Call[struct{}, charge](context.Background(), f.c, http.MethodGet, "/charges/ch_1", struct{}{})
	if err != nil || got.ID != "ch_1" || meta.Attempts != 2 {
		t.Fatalf("got %+v, meta %+v, err %v", got, meta, err)
	}
	for _, r := range f.requests() {
		if r.HasKey {
			t.Errorf("GET retry sent a key %q", r.Key)
		}
	}
}

func TestGivesUpAfterMaxAttemptsWithLastError(t *testing.T) {
	f := setup(t, script(envelope(500, "InternalError", "first"), envelope(503, "Unavailable", "last")), retry3)
	_, meta, err := post.Call(context.Background(), f.c, in1000)
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || e.Message != "last" {
		t.Fatalf("err = %v, want the last attempt's 503", err)
	}
	if meta.Attempts != 3 || e.Meta.Attempts != 3 || !e.Retryable() {
		t.Errorf("Meta.Attempts %d, Error.Meta.Attempts %d, Retryable %v", meta.Attempts, e.Meta.Attempts, e.Retryable())
	}
}

func TestNetworkErrorGivesUpWithWrappedError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens: connection refused
	c, err := New(url, retry3)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	_, meta, err := post.Call(context.Background(), c, in1000)
	if err == nil {
		t.Fatal("no error")
	}
	var e *Error
	if errors.As(err, &e) {
		t.Errorf("network error is an *Error: %v", e)
	}
	if meta.Attempts != 3 || meta.Status != 0 || meta.IdempotencyKey == "" || len(waits) != 2 {
		t.Errorf("meta %+v, waits %v; want 3 attempts, status 0, a key, 2 waits", meta, waits)
	}
}

// With Prefer: wait off (PreferWait < 0), a 409 is retried after its
// Retry-After. (retry_wait_test.go has the retries that ask to wait.)
func TestInProgressRetriedAfterRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		policy     Retry
		want       time.Duration
	}{
		{"Retry-After longer than backoff", "3", Retry{MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, PreferWait: -1}, 3 * time.Second},
		{"Retry-After beyond MaxDelay is still honoured", "30", Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, PreferWait: -1}, 30 * time.Second},
		{"backoff longer than Retry-After wins", "1", Retry{MaxAttempts: 3, BaseDelay: 4 * time.Second, MaxDelay: 8 * time.Second, PreferWait: -1}, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			busy := envelope(http.StatusConflict, CodeInProgress, ErrInProgress.Message, "Retry-After", tt.retryAfter)
			f := setup(t, script(busy, jsonReply(http.StatusCreated, charge{ID: "ch_1"}, HeaderReplayed, "true")), WithRetry(tt.policy))
			_, meta, err := post.Call(context.Background(), f.c, in1000)
			if err != nil {
				t.Fatal(err)
			}
			if !meta.IdempotentReplayed || meta.Attempts != 2 {
				t.Errorf("meta %+v: want a replayed answer on attempt 2", meta)
			}
			if w := f.slept(); len(w) != 1 || w[0] != tt.want {
				t.Fatalf("waits %v, want [%v]", w, tt.want)
			}
		})
	}
}

// The one test that really waits: a 1-second Retry-After through the real
// sleep. It checks the path end to end, not the time taken.
func TestInProgressRetriedAfterRealRetryAfter(t *testing.T) {
	busy := envelope(http.StatusConflict, CodeInProgress, ErrInProgress.Message, "Retry-After", "1")
	f := setup(t, script(busy, created), WithRetry(Retry{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, PreferWait: -1}))
	f.c.sleep = sleepCtx
	_, meta, err := post.Call(context.Background(), f.c, in1000)
	if err != nil || meta.Attempts != 2 || meta.Status != http.StatusCreated {
		t.Fatalf("meta %+v, err %v", meta, err)
	}
	reqs := f.requests()
	if reqs[0].Key != reqs[1].Key {
		t.Errorf("keys %q then %q", reqs[0].Key, reqs[1].Key)
	}
}

func Test5xxRetriedWithBackoff(t *testing.T) {
	f := setup(t, script(unavailable, unavailable, unavailable, created),
		WithRetry(Retry{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}))
	if _, _, err := post.Call(context.Background(), f.c, in1000); err != nil {
		t.Fatal(err)
	}
	// rand is fixed at 0.5: each wait is 3/4 of a ceiling that doubles.
	want := []time.Duration{75 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond}
	got := f.slept()
	if len(got) != len(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}

func Test5xxRetryAfterHonoured(t *testing.T) {
	busy := envelope(http.StatusServiceUnavailable, "Unavailable", "store down", "Retry-After", "7")
	f := setup(t, script(busy, created), retry3)
	if _, _, err := post.Call(context.Background(), f.c, in1000); err != nil {
		t.Fatal(err)
	}
	if w := f.slept(); len(w) != 1 || w[0] != 7*time.Second {
		t.Fatalf("waits %v, want [7s]", w)
	}
}

func TestContextCancelStopsRetries(t *testing.T) {
	t.Run("during the wait", func(t *testing.T) {
		f := setup(t, envelope(503, "Unavailable", "down", "Retry-After", "3600"), WithRetry(Retry{MaxAttempts: 10}))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		waiting := make(chan struct{})
		f.c.sleep = func(ctx context.Context, d time.Duration) error {
			close(waiting)
			return sleepCtx(ctx, d) // an hour: only the cancel ends it
		}
		go func() { <-waiting; cancel() }()
		_, meta, err := post.Call(ctx, f.c, in1000)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != 503 {
			t.Errorf("err = %v, want it to carry the last 503", err)
		}
		if n := len(f.requests()); n != 1 || meta.Attempts != 1 {
			t.Errorf("%d requests, Meta.Attempts %d, want 1", n, meta.Attempts)
		}
	})
	t.Run("during a request", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		arrived := make(chan struct{}, 1)
		f := setup(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			<-r.Context().Done() // hold the answer until the client goes away
		}, WithRetry(Retry{MaxAttempts: 10}))
		go func() { <-arrived; cancel() }()
		_, meta, err := post.Call(ctx, f.c, in1000)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if meta.Attempts != 1 || len(f.slept()) != 0 {
			t.Errorf("Meta.Attempts %d, waits %v: want 1 attempt, no wait", meta.Attempts, f.slept())
		}
	})
	t.Run("already done", func(t *testing.T) {
		f := setup(t, created, retry3)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, meta, err := post.Call(ctx, f.c, in1000)
		if !errors.Is(err, context.Canceled) || meta.Attempts != 0 || len(f.requests()) != 0 {
			t.Fatalf("err %v, meta %+v, %d requests: want Canceled and nothing sent", err, meta, len(f.requests()))
		}
	})
	t.Run("wait would pass the deadline", func(t *testing.T) {
		f := setup(t, inProgress, WithRetry(Retry{MaxAttempts: 10})) // Retry-After: 3
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		f.c.now = func() time.Time { return time.Now().Add(time.Hour - time.Second) }
		_, meta, err := post.Call(ctx, f.c, in1000)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrInProgress) {
			t.Fatalf("err = %v, want DeadlineExceeded and the last ErrInProgress", err)
		}
		if meta.Attempts != 1 || len(f.slept()) != 0 {
			t.Errorf("Meta.Attempts %d, waits %v: want 1 attempt and no wait begun", meta.Attempts, f.slept())
		}
	})
}

func TestBackoffIsJitteredExponentialAndCapped(t *testing.T) {
	const base, maxd = 100 * time.Millisecond, 2 * time.Second
	at := func(r float64) func() float64 { return func() float64 { return r } }
	tests := []struct {
		name string
		n    int
		rnd  float64
		want time.Duration
	}{
		{"first retry, lowest draw: half the base", 1, 0, 50 * time.Millisecond},
		{"first retry, middle draw", 1, 0.5, 75 * time.Millisecond},
		{"second retry doubles", 2, 0, 100 * time.Millisecond},
		{"third retry doubles again", 3, 0, 200 * time.Millisecond},
		{"fifth retry", 5, 0, 800 * time.Millisecond},
		{"sixth retry reaches the cap", 6, 0, time.Second},
		{"capped, highest draw stays under MaxDelay", 6, 0.999, 1999 * time.Millisecond},
		{"far past the cap", 40, 0.5, 1500 * time.Millisecond},
		{"no overflow at huge n", 1000, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.n, base, maxd, at(tt.rnd)); got != tt.want {
				t.Fatalf("backoff(%d, rnd=%v) = %v, want %v", tt.n, tt.rnd, got, tt.want)
			}
		})
	}
	// Jitter: different draws give different waits, all inside [c/2, c].
	lo, hi := backoff(3, base, maxd, at(0)), backoff(3, base, maxd, at(0.99))
	if lo == hi || lo < 200*time.Millisecond || hi > 400*time.Millisecond {
		t.Errorf("retry 3 waits %v..%v, want distinct values within [200ms, 400ms]", lo, hi)
	}
	// Huge MaxDelay: doubling must not overflow into a negative wait.
	if d := backoff(200, time.Second, time.Duration(1<<63-1), at(0.5)); d <= 0 {
		t.Errorf("backoff overflowed to %v", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"1", time.Second},
		{" 30 ", 30 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"soon", 0},
		{"1.5", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRetryPolicyValidated(t *testing.T) {
	bad := []Retry{
		{MaxAttempts: -1},
		{MaxAttempts: 3, BaseDelay: -time.Second},
		{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Millisecond},
		{MaxAttempts: 3, PreferWait: 500 * time.Millisecond},
	}
	for _, r := range bad {
		if _, err := New("http://x.test", WithRetry(r)); err == nil {
			t.Errorf("WithRetry(%+v): no error", r)
		}
	}
	c, err := New("http://x.test", WithRetry(Retry{MaxAttempts: 4}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Retry{MaxAttempts: 4, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay, PreferWait: MaxPreferWait}); c.retry != want {
		t.Errorf("retry = %+v, want defaults filled: %+v", c.retry, want)
	}
	for in, want := range map[time.Duration]time.Duration{-1: -1, time.Second: time.Second, 90 * time.Second: MaxPreferWait} {
		c, err := New("http://x.test", WithRetry(Retry{MaxAttempts: 2, PreferWait: in}))
		if err != nil || c.retry.PreferWait != want {
			t.Errorf("PreferWait %v: got %v (err %v), want %v", in, c.retry.PreferWait, err, want)
		}
	}
}
