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

// TestParkedWaitersAreBounded: past maxRunWaiters held at once, a retry
// with Prefer: wait on a parked run is answered at once, as without the
// header (no Preference-Applied), so its client falls back to its backoff.
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
	app.runWaiters.Store(maxRunWaiters) // as many held as allowed
	w := post("Prefer", "wait=60")
	if w.Code != 204 || w.Header().Get("Preference-Applied") != "" || w.Header().Get(HeaderRunID) != id {
		t.Fatalf("a retry past the bound: %d %v; want the 204 naming run %s at once, without Preference-Applied", w.Code, w.Header(), id)
	}
	if n := app.runWaiters.Load(); n != maxRunWaiters {
		t.Fatalf("%d waiters counted after the refused one, want %d", n, maxRunWaiters)
	}
}
