// Package oketest helps test oke flows: an app on the memory driver that
// closes with the test, requests in one call, and assertions of the
// promise oke makes — a retried call with the same Idempotency-Key runs the
// flow once and replays its answer, also when the retries arrive at once.
//
//	func TestChargeRunsOnce(t *testing.T) {
//		app := oketest.NewApp(t, oke.Config{}, func(app *oke.App) {
//			app.Handle(oke.POST("/charges"), ChargeFlow)
//		})
//		first, _ := oketest.Twice(t, app, "POST", "/charges", `{"amount":1000,"currency":"usd"}`)
//		if first.Status != 201 {
//			t.Fatalf("charge: %d %s", first.Status, first.Body)
//		}
//	}
//
// It counts executions with the app's oke_flow_executions_total series
// (App.Registry), so a flow that Calls others counts them too.
//
// For durable flows, NewDurable runs the app and its memory driver on a
// fake Clock (sleeps end when the test advances it) and can cut an
// execution off right after a given step, as a crash would (CrashAfter).
package oketest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/okengine/oke"
)

// NewApp returns a started app for a test: cfg as given (a memory driver
// when cfg.Driver is nil, no periodic sweep, a logger that writes to the
// test's output) with the routes bind adds. It fails the test when Start
// does, and closes the app when the test ends.
func NewApp(t testing.TB, cfg oke.Config, bind func(app *oke.App)) *oke.App {
	t.Helper()
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	app := oke.New(cfg)
	t.Cleanup(func() { app.Close(context.Background()) })
	if bind != nil {
		bind(app)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatalf("oketest: start the app: %v", err)
	}
	return app
}

// testWriter writes log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Replayed reports whether the answer is a stored one (Idempotent-Replayed:
// true).
func (r *Response) Replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// Call sends one request to h (an *oke.App, or any handler) and returns the
// answer. hdr holds header name/value pairs.
func Call(t testing.TB, h http.Handler, method, path, body string, hdr ...string) *Response {
	t.Helper()
	if len(hdr)%2 != 0 {
		t.Fatalf("oketest: headers come in name/value pairs, got %q", hdr)
	}
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	b, _ := io.ReadAll(w.Result().Body)
	return &Response{Status: w.Code, Header: w.Header(), Body: b}
}

// Key returns a fresh valid Idempotency-Key.
func Key() string {
	var b [12]byte
	rand.Read(b[:])
	return "oketest-" + hex.EncodeToString(b[:])
}

// Executions is how many times the app's flows' functions started so far
// (oke_flow_executions_total, summed over the flows).
func Executions(t testing.TB, app *oke.App) float64 {
	t.Helper()
	mfs, err := app.Registry().Gather()
	if err != nil {
		t.Fatalf("oketest: gather metrics: %v", err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "oke_flow_executions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// Twice sends a request to app twice with one Idempotency-Key (the one in
// hdr, or a fresh one) and fails the test unless the second answer is the
// first one replayed — same status, body, Content-Type and Location, with
// Idempotent-Replayed: true — and the flows ran no more for it. It returns
// both answers.
func Twice(t testing.TB, app *oke.App, method, path, body string, hdr ...string) (first, second *Response) {
	t.Helper()
	hdr = withKey(hdr)
	first = Call(t, app, method, path, body, hdr...)
	ran := Executions(t, app)
	second = Call(t, app, method, path, body, hdr...)
	if again := Executions(t, app) - ran; again != 0 {
		t.Errorf("oketest: %s %s with the same Idempotency-Key ran the flow again (%v more executions)", method, path, again)
	}
	if !second.Replayed() || !sameAnswer(first, second) {
		t.Errorf("oketest: %s %s with the same Idempotency-Key: the second answer is not the first one replayed:\nfirst:  %d %s\nsecond: %d (replayed %v) %s",
			method, path, first.Status, first.Body, second.Status, second.Replayed(), second.Body)
	}
	return first, second
}

// Concurrently sends n copies of a request to app at once, with one
// Idempotency-Key (the one in hdr, or a fresh one), and fails the test
// unless the flows ran as for one request, and every answer is either that
// request's (live, or replayed) or 409 IdempotencyInProgress. It returns the
// answers.
func Concurrently(t testing.TB, app *oke.App, n int, method, path, body string, hdr ...string) []*Response {
	t.Helper()
	hdr = withKey(hdr)
	before := Executions(t, app)
	out := make([]*Response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range out {
		wg.Go(func() {
			<-start
			out[i] = Call(t, app, method, path, body, hdr...)
		})
	}
	close(start)
	wg.Wait()
	one := Executions(t, app) - before
	// Once every copy has its answer, a last one replays the request's.
	last := Call(t, app, method, path, body, hdr...)
	var live *Response
	for _, r := range out {
		switch {
		case r.Status == http.StatusConflict && bytes.Contains(r.Body, []byte(`"IdempotencyInProgress"`)):
		case !r.Replayed():
			if live != nil {
				t.Errorf("oketest: %d copies of %s %s with one Idempotency-Key: two live answers:\n%d %s\n%d %s", n, method, path, live.Status, live.Body, r.Status, r.Body)
			}
			live = r
		case !sameAnswer(r, last):
			t.Errorf("oketest: a replay differs from the stored answer:\n%d %s\n%d %s", r.Status, r.Body, last.Status, last.Body)
		}
	}
	if live != nil && !sameAnswer(live, last) {
		t.Errorf("oketest: the stored answer differs from the live one:\nlive:   %d %s\nstored: %d %s", live.Status, live.Body, last.Status, last.Body)
	}
	if again := Executions(t, app) - before - one; again != 0 || one == 0 {
		t.Errorf("oketest: %d copies of %s %s with one Idempotency-Key: executions %v during, %v after; want the flow's once", n, method, path, one, again)
	}
	return out
}

func withKey(hdr []string) []string {
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) == "Idempotency-Key" {
			return hdr
		}
	}
	return append([]string{"Idempotency-Key", Key()}, hdr...)
}

func sameAnswer(a, b *Response) bool {
	return a.Status == b.Status && bytes.Equal(a.Body, b.Body) &&
		a.Header.Get("Content-Type") == b.Header.Get("Content-Type") && a.Header.Get("Location") == b.Header.Get("Location")
}
