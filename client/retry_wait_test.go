package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// holdingServer is a stand-in for an oke app whose flow runs until the
// test releases it: a second request with the same key gets 409
// IdempotencyInProgress (Retry-After: 30, the lease left) — unless it
// carries Prefer: wait=N, in which case the server holds it until the first
// request finishes and answers the stored response, with
// Idempotent-Replayed: true and Preference-Applied: wait=N (RFC 7240).
type holdingServer struct {
	srv      *httptest.Server
	started  chan struct{} // the first request is running
	holding  chan string   // a request is being held; its Prefer value
	release  chan struct{} // closed by the test: the first request finishes
	mu       sync.Mutex
	prefers  []string // each request's Prefer header, in order
	running  bool
	finished bool
}

func newHoldingServer(t *testing.T) *holdingServer {
	h := &holdingServer{started: make(chan struct{}), holding: make(chan string, 8), release: make(chan struct{})}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		h.mu.Lock()
		h.prefers = append(h.prefers, r.Header.Get(HeaderPrefer))
		first := !h.running
		h.running = true
		done := h.finished
		h.mu.Unlock()
		stored := func() {
			w.Header().Set("Location", "/charges/ch_1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"ch_1","amount":1000}`)
		}
		switch {
		case first:
			close(h.started)
			<-h.release
			h.mu.Lock()
			h.finished = true
			h.mu.Unlock()
			stored()
		case done:
			w.Header().Set(HeaderReplayed, "true")
			stored()
		case r.Header.Get(HeaderPrefer) != "":
			h.holding <- r.Header.Get(HeaderPrefer)
			<-h.release // held until the first request finishes
			w.Header().Set(HeaderPreferenceApplied, r.Header.Get(HeaderPrefer))
			w.Header().Set(HeaderReplayed, "true")
			stored()
		default:
			inProgress(0, w, r) // 409, Retry-After: 3
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// A retry of a 409 asks the server to hold it (Prefer: wait=60) instead of
// sleeping on Retry-After, and gets the first call's stored answer when
// that call finishes: Meta.Waited and IdempotentReplayed.
func TestInProgressRetryWaitsOnTheServer(t *testing.T) {
	h := newHoldingServer(t)
	c, err := New(h.srv.URL, WithRetry(Retry{MaxAttempts: 3}))
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() }
	c.rand = func() float64 { return 0.5 }
	key := NewKey()

	first := make(chan error, 1)
	go func() {
		_, _, err := post.Call(context.Background(), c, in1000, Key(key))
		first <- err
	}()
	<-h.started
	go func() {
		<-h.holding // the retry is held: now let the first call finish
		close(h.release)
	}()
	got, meta, err := post.Call(context.Background(), c, in1000, Key(key))
	if err != nil {
		t.Fatalf("second call: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first call: %v", err)
	}
	if got.ID != "ch_1" || meta.Status != http.StatusCreated || !meta.IdempotentReplayed || !meta.Waited || meta.Attempts != 2 {
		t.Errorf("got %+v, meta %+v: want the stored 201, replayed, waited, on attempt 2", got, meta)
	}
	// Requests: the first call, the second call's 409, its held retry.
	h.mu.Lock()
	prefers := h.prefers
	h.mu.Unlock()
	if want := []string{"", "", "wait=60"}; !slices.Equal(prefers, want) {
		t.Errorf("Prefer headers %q, want %q", prefers, want)
	}
	// The only wait is the backoff (75ms at jitter 0.5): not Retry-After's 3s.
	if want := []time.Duration{75 * time.Millisecond}; !slices.Equal(slept, want) {
		t.Errorf("waits %v, want %v", slept, want)
	}
}

var (
	busy30   = envelope(http.StatusConflict, CodeInProgress, ErrInProgress.Message, "Retry-After", "30")
	heldBusy = envelope(http.StatusConflict, CodeInProgress, ErrInProgress.Message, "Retry-After", "30", HeaderPreferenceApplied, "wait=60")
	heldOK   = jsonReply(http.StatusCreated, charge{ID: "ch_1"}, HeaderReplayed, "true", HeaderPreferenceApplied, "wait=60")
	replayOK = jsonReply(http.StatusCreated, charge{ID: "ch_1"}, HeaderReplayed, "true")
)

// How each answer shapes the next attempt: whether it asks to wait, and
// how long the client sleeps first.
func TestPreferWaitRetries(t *testing.T) {
	retry := Retry{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	tests := []struct {
		name    string
		replies []reply
		policy  Retry
		opts    []CallOption
		prefers []string        // each request's Prefer header
		waits   []time.Duration // each sleep before a retry
		waited  bool            // Meta.Waited of the last answer
	}{
		{
			name:    "a server that ignores Prefer: its Retry-After is honoured from then on",
			replies: []reply{busy30, busy30, busy30, replayOK}, policy: retry,
			prefers: []string{"", "wait=60", "wait=60", "wait=60"},
			waits:   []time.Duration{75 * time.Millisecond, 30 * time.Second, 30 * time.Second},
		},
		{
			name:    "the server held the retry, and its wait ran out: ask again at once",
			replies: []reply{busy30, heldBusy, heldOK}, policy: retry,
			prefers: []string{"", "wait=60", "wait=60"},
			waits:   []time.Duration{75 * time.Millisecond, 150 * time.Millisecond},
			waited:  true,
		},
		{
			name:    "PreferWait sets N",
			replies: []reply{busy30, heldOK}, policy: Retry{MaxAttempts: 2, PreferWait: 5 * time.Second},
			prefers: []string{"", "wait=5"},
			waits:   []time.Duration{75 * time.Millisecond},
			waited:  true,
		},
		{
			name:    "PreferWait over 60s is 60s",
			replies: []reply{busy30, heldOK}, policy: Retry{MaxAttempts: 2, PreferWait: 10 * time.Minute},
			prefers: []string{"", "wait=60"},
			waits:   []time.Duration{75 * time.Millisecond},
			waited:  true,
		},
		{
			name:    "PreferWait < 0 turns it off: Retry-After, as before",
			replies: []reply{busy30, replayOK}, policy: Retry{MaxAttempts: 2, PreferWait: -1},
			prefers: []string{"", ""},
			waits:   []time.Duration{30 * time.Second},
		},
		{
			name:    "only a retry of a 409 asks to wait",
			replies: []reply{unavailable, busy30, heldOK}, policy: retry,
			prefers: []string{"", "", "wait=60"},
			waits:   []time.Duration{75 * time.Millisecond, 150 * time.Millisecond},
			waited:  true,
		},
		{
			name:    "the caller's own Prefer is kept",
			replies: []reply{busy30, heldOK}, policy: retry, opts: []CallOption{Header("Prefer", "return=minimal")},
			prefers: []string{"return=minimal", "return=minimal, wait=60"},
			waits:   []time.Duration{75 * time.Millisecond},
			waited:  true,
		},
		{
			name:    "a Preference-Applied on an answer to no Prefer is not a wait",
			replies: []reply{heldOK}, policy: retry,
			prefers: []string{""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t, script(tt.replies...), WithRetry(tt.policy))
			_, meta, err := post.Call(context.Background(), f.c, in1000, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			reqs := f.requests()
			var prefers []string
			for _, r := range reqs {
				prefers = append(prefers, r.Header.Get(HeaderPrefer))
				if r.Key != meta.IdempotencyKey {
					t.Errorf("key %q, want the call's one key %q", r.Key, meta.IdempotencyKey)
				}
			}
			if !slices.Equal(prefers, tt.prefers) {
				t.Errorf("Prefer headers %q, want %q", prefers, tt.prefers)
			}
			if w := f.slept(); !slices.Equal(w, tt.waits) {
				t.Errorf("waits %v, want %v", w, tt.waits)
			}
			if meta.Attempts != len(tt.replies) || meta.Waited != tt.waited {
				t.Errorf("meta %+v: want %d attempts, Waited %v", meta, len(tt.replies), tt.waited)
			}
		})
	}
}

// N is kept a second short of what the context and the http.Client leave,
// so the server's answer arrives before the client gives up on it; with
// under a second left, no Prefer is sent and Retry-After rules.
func TestPreferWaitFitsTheDeadline(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name     string
		left     time.Duration // before ctx's deadline, at the first answer
		timeout  time.Duration // http.Client.Timeout
		prefer   string        // the retry's Prefer
		deadline bool          // the call gives up on the deadline instead
	}{
		{name: "20s left", left: 20 * time.Second, prefer: "wait=18"}, // 20s − 75ms backoff − 1s
		{name: "no deadline", prefer: "wait=60"},
		{name: "an http.Client Timeout of 10s", timeout: 10 * time.Second, prefer: "wait=9"},
		{name: "both", left: 5 * time.Second, timeout: 10 * time.Second, prefer: "wait=3"},
		{name: "under a second: no Prefer, and Retry-After is past the deadline", left: 1500 * time.Millisecond, deadline: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []Option{WithRetry(Retry{MaxAttempts: 2})}
			if tt.timeout > 0 {
				opts = append(opts, WithHTTPClient(&http.Client{Timeout: tt.timeout}))
			}
			f := setup(t, script(busy30, heldOK), opts...)
			ctx := context.Background()
			if tt.left > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, start.Add(time.Hour))
				defer cancel()
				f.c.now = func() time.Time { return start.Add(time.Hour - tt.left) }
			}
			_, meta, err := post.Call(ctx, f.c, in1000)
			if tt.deadline {
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrInProgress) || meta.Attempts != 1 {
					t.Fatalf("err %v, meta %+v: want DeadlineExceeded and the last 409 after 1 attempt", err, meta)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := f.requests()[1].Header.Get(HeaderPrefer); got != tt.prefer {
				t.Errorf("Prefer %q, want %q", got, tt.prefer)
			}
		})
	}
}

func TestWaitApplied(t *testing.T) {
	tests := []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"wait=10"}, true},
		{[]string{"WAIT=10"}, true},
		{[]string{"return=minimal, wait=5"}, true},
		{[]string{"return=minimal", "wait=5"}, true},
		{[]string{"return=minimal"}, false},
		{[]string{"waiting=5"}, false},
	}
	for _, tt := range tests {
		if got := waitApplied(tt.values); got != tt.want {
			t.Errorf("waitApplied(%q) = %v, want %v", tt.values, got, tt.want)
		}
	}
}
