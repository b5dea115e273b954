package oke

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestPreferWait: RFC 7240's wait preference, read as DESIGN.md section 10
// says (seconds, at most 60), among other preferences (lists, several
// headers, any case, quoted values, parameters) and ignoring what it cannot
// read.
func TestPreferWait(t *testing.T) {
	for _, tc := range []struct {
		header []string
		want   time.Duration
	}{
		{nil, 0},
		{[]string{"wait=5"}, 5 * time.Second},
		{[]string{"respond-async, wait=10"}, 10 * time.Second},
		{[]string{"return=minimal", "Wait = 3"}, 3 * time.Second},
		{[]string{`wait="7"`}, 7 * time.Second},
		{[]string{"wait=600"}, 60 * time.Second},
		{[]string{"wait=0"}, 0},
		{[]string{"wait=-1"}, 0},
		{[]string{"wait=soon"}, 0},
		{[]string{"handling=lenient"}, 0},
		{[]string{"return=minimal, wait=5"}, 5 * time.Second},
		{[]string{"return=minimal,wait=5"}, 5 * time.Second},
		{[]string{"return=minimal", "wait=8"}, 8 * time.Second},
		{[]string{"WAIT=4"}, 4 * time.Second},
		{[]string{"wait=4; foo=bar"}, 4 * time.Second},
		{[]string{"wait = 4 ;foo"}, 4 * time.Second},
		{[]string{`foo="a, wait=9", wait=2`}, 2 * time.Second},
		{[]string{`foo="a \" wait=9", wait=2`}, 2 * time.Second},
		{[]string{`wait="1\2"`}, 12 * time.Second},
		{[]string{"wait=99999999999"}, 60 * time.Second},
		{[]string{"wait=5s"}, 0},
		{[]string{"wait="}, 0},
		{[]string{"wait"}, 0},
		{[]string{"respond-async; wait=5"}, 0}, // a parameter of respond-async, not a preference
		{[]string{"wait=3, wait=9"}, 3 * time.Second},
		{[]string{"", " , ,wait=6"}, 6 * time.Second},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		for _, h := range tc.header {
			r.Header.Add("Prefer", h)
		}
		if got := preferWait(r); got != tc.want {
			t.Errorf("Prefer %q: %v, want %v", tc.header, got, tc.want)
		}
	}
}

// heldForKeys is how many requests app holds by Prefer: wait right now
// (for keys in progress and parked runs).
func (a *App) heldForKeys() int {
	a.waits.mu.Lock()
	defer a.waits.mu.Unlock()
	return a.waits.held
}

// TestPreferWaitCaps: with a cap of K requests held for one key
// (Config.MaxWaitersPerKey) or in all (Config.MaxWaiters), K requests with
// Prefer: wait are held while the key's first request runs, and the next
// one is answered at once as without the header — 409
// IdempotencyInProgress with Retry-After and no Preference-Applied — and
// counted in oke_idempotency_wait_refused_total; the K held get the first
// request's stored answer when it finishes. A negative cap holds none.
func TestPreferWaitCaps(t *testing.T) {
	for _, tc := range []struct {
		name          string
		perKey, total int
		inFlight      int // Config.MaxInFlight
		k             int // requests held
	}{
		{"per key", 3, 0, 0, 3},
		{"in all", 0, 2, 0, 2},
		{"by default a quarter of MaxInFlight", 0, 0, 8, 2},
		{"none", -1, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release, started := make(chan struct{}), make(chan struct{})
			app := New(Config{SweepInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				MaxWaitersPerKey: tc.perKey, MaxWaiters: tc.total, MaxInFlight: tc.inFlight})
			app.Handle(POST("/slow"), NewFlow("t.capped", Options{},
				func(ctx context.Context, in struct{}, fx *Fx) (Response[int], error) {
					fx.Raw(ctx, "write", func(context.Context) error { return nil })
					close(started)
					<-release
					return Created(7, "/slow/7"), nil
				}))
			if err := app.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			finish := func() { once.Do(func() { close(release) }) }
			t.Cleanup(func() {
				finish()
				app.Close(context.Background())
			})
			post := func(hdr ...string) *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/slow", strings.NewReader(`{}`))
				r.Header.Set("Idempotency-Key", "capped-waiters-0001")
				for i := 0; i+1 < len(hdr); i += 2 {
					r.Header.Set(hdr[i], hdr[i+1])
				}
				w := httptest.NewRecorder()
				app.ServeHTTP(w, r)
				return w
			}
			first := make(chan *httptest.ResponseRecorder)
			go func() { first <- post() }()
			<-started
			held := make(chan *httptest.ResponseRecorder, tc.k)
			for i := 0; i < tc.k; i++ {
				go func() { held <- post("Prefer", "wait=60") }()
			}
			for deadline := time.Now().Add(time.Minute); app.heldForKeys() != tc.k; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d requests held, want %d", app.heldForKeys(), tc.k)
				}
			}
			// Past the cap: answered without waiting (a request that
			// waited would say Preference-Applied, and be answered
			// after its one second at the earliest).
			w := post("Prefer", "wait=1")
			if w.Code != 409 || w.Header().Get("Preference-Applied") != "" || w.Header().Get("Retry-After") == "" ||
				!strings.Contains(w.Body.String(), "IdempotencyInProgress") {
				t.Fatalf("a request past the cap: %d %v %s; want 409 IdempotencyInProgress with Retry-After, no Preference-Applied",
					w.Code, w.Header(), w.Body)
			}
			if n := testutil.ToFloat64(app.metrics.refused.WithLabelValues("t.capped")); n != 1 {
				t.Fatalf("oke_idempotency_wait_refused_total = %v, want 1", n)
			}
			if n := app.heldForKeys(); n != tc.k {
				t.Fatalf("%d requests held after the refused one, want %d", n, tc.k)
			}
			finish()
			f := <-first
			for i := 0; i < tc.k; i++ {
				w := <-held
				if w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != f.Body.String() ||
					w.Header().Get("Preference-Applied") != "wait=60" {
					t.Fatalf("held request %d: %d %v %s; want the first's %d %s replayed", i, w.Code, w.Header(), w.Body, f.Code, f.Body)
				}
			}
			if n := app.heldForKeys(); n != 0 {
				t.Fatalf("%d requests still counted held", n)
			}
		})
	}
}
