package oke_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/okengine/oke"
	"github.com/okengine/oke/driver/memory"
)

// A run parked by a durable sleep wakes when the sleep ends, not at the
// scheduler's next poll: with a poll interval of an hour, only the wake-up
// the parking process arms can continue it.
func TestSleepWakesWithoutAPoll(t *testing.T) {
	app := oke.New(oke.Config{Driver: memory.New(), PollInterval: time.Hour, SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	var after atomic.Int32
	app.Handle(oke.POST("/nap"), oke.NewFlow("t.nap", oke.Options{Durable: true},
		func(ctx context.Context, in struct{}, fx *oke.Fx) (oke.Response[int], error) {
			if err := oke.Sleep(ctx, "nap", 300*time.Millisecond); err != nil {
				return oke.Response[int]{}, err
			}
			after.Add(1)
			return oke.OK(1), nil
		}))
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	w := httptest.NewRecorder()
	app.ServeHTTP(w, httptest.NewRequest("POST", "/nap", strings.NewReader(`{}`)))
	if w.Code != http.StatusNoContent {
		t.Fatalf("%d %s, want 204 (parked)", w.Code, w.Body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for after.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sleep never ended: nothing woke the scheduler before its hourly poll")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
