package oke

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestParkedWaitersAreBounded: past the caps of Prefer: wait (the app's
// MaxWaiters, counted with the requests held for keys in progress), a
// retry with Prefer: wait on a parked run is answered at once, as without
// the header (no Preference-Applied), so its client falls back to its
// backoff.
func TestParkedWaitersAreBounded(t *testing.T) {
	app := New(Config{SweepInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	app.Handle(POST("/nap"), NewFlow("t.nap", Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *Fx) (Response[int], error) {
			if err := Sleep(ctx, "an hour", time.Hour); err != nil {
				return Response[int]{}, err
			}
			return OK(1), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	post := func(hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/nap", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "bounded-waiters-01")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	first := post()
	id := first.Header().Get(HeaderRunID)
	if first.Code != 204 || id == "" {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	_, total := app.waitCaps()
	app.waits.mu.Lock()
	app.waits.held = total // as many held as allowed
	app.waits.mu.Unlock()
	w := post("Prefer", "wait=60")
	if w.Code != 204 || w.Header().Get("Preference-Applied") != "" || w.Header().Get(HeaderRunID) != id {
		t.Fatalf("a retry past the bound: %d %v; want the 204 naming run %s at once, without Preference-Applied", w.Code, w.Header(), id)
	}
	if n := app.heldForKeys(); n != total {
		t.Fatalf("%d waiters counted after the refused one, want %d", n, total)
	}
}

// TestParkedWaitersPerKeyAreBounded: Config.MaxWaitersPerKey bounds the
// requests held for one parked run's key too: with a cap of 1 and one
// held, the next is answered the 204 at once, without Preference-Applied;
// the held one, and a request with another key, still wait.
func TestParkedWaitersPerKeyAreBounded(t *testing.T) {
	app := New(Config{SweepInterval: -1, MaxWaitersPerKey: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	app.Handle(POST("/nap"), NewFlow("t.nap1", Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *Fx) (Response[int], error) {
			if err := Sleep(ctx, "an hour", time.Hour); err != nil {
				return Response[int]{}, err
			}
			return OK(1), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(context.Background()) })
	post := func(key string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/nap", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", key)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	for _, key := range []string{"parked-per-key-0001", "parked-per-key-0002"} {
		if w := post(key); w.Code != 204 {
			t.Fatalf("first with %s: %d %v", key, w.Code, w.Header())
		}
	}
	held := make(chan *httptest.ResponseRecorder, 2)
	go func() { held <- post("parked-per-key-0001", "Prefer", "wait=60") }()
	for deadline := time.Now().Add(time.Minute); app.heldForKeys() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first retry was never held")
		}
	}
	w := post("parked-per-key-0001", "Prefer", "wait=60")
	if w.Code != 204 || w.Header().Get("Preference-Applied") != "" {
		t.Fatalf("a second retry of one key past its cap: %d %v; want the 204 at once, without Preference-Applied", w.Code, w.Header())
	}
	go func() { held <- post("parked-per-key-0002", "Prefer", "wait=60") }()
	for deadline := time.Now().Add(time.Minute); app.heldForKeys() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a retry of another key was not held")
		}
	}
	app.Close(context.Background()) // the held ones are answered now
	for range 2 {
		if w := <-held; w.Header().Get("Preference-Applied") != "wait=60" {
			t.Fatalf("a held retry: %d %v", w.Code, w.Header())
		}
	}
}
