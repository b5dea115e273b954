package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/okengine/oke"
)

// TestParkedRunResultAcrossInstances: two apps on one schema (two instances
// of one service). A parks a durable run and, having no scheduler, cannot
// continue it; B's scheduler does. A retry on A with Prefer: wait is held
// until the run ends on B — which A learns from the journal, not from B's
// process — and gets the run's final response; App.AwaitRun on A too.
func TestParkedRunResultAcrossInstances(t *testing.T) {
	twoDrivers(t)
	da := newDriver(t)
	db := sameSchema(t, da)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	flow := oke.NewFlow("pr.nap", oke.Options{Durable: true},
		func(ctx context.Context, in struct{ N int }, fx *oke.Fx) (oke.Response[int], error) {
			if err := oke.Sleep(ctx, "nap", 500*time.Millisecond); err != nil {
				return oke.Response[int]{}, err
			}
			return oke.Created(in.N*2, "/naps/1"), nil
		})
	newApp := func(cfg oke.Config) *oke.App {
		cfg.SweepInterval, cfg.Logger = -1, quiet
		app := oke.New(cfg)
		app.Handle(oke.POST("/nap"), flow)
		if err := app.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { app.Close(context.Background()) })
		return app
	}
	a := newApp(oke.Config{Driver: da, PollInterval: -1}) // no scheduler: B continues the run
	newApp(oke.Config{Driver: db, PollInterval: 20 * time.Millisecond})
	post := func(hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/nap", strings.NewReader(`{"N":21}`))
		r.Header.Set("Idempotency-Key", "parked-across-0001")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		return w
	}
	first := post()
	id := first.Header().Get(oke.HeaderRunID)
	if first.Code != 204 || id == "" {
		t.Fatalf("first on A: %d %v; want the parked 204 naming its run", first.Code, first.Header())
	}
	w := post("Prefer", "wait=60")
	if w.Code != 201 || w.Body.String() != "42\n" || w.Header().Get("Location") != "/naps/1" ||
		w.Header().Get("Idempotent-Replayed") != "true" || w.Header().Get("Preference-Applied") != "wait=60" {
		t.Fatalf("held retry on A: %d %q %v; want the run's 201 42 that B finished", w.Code, w.Body, w.Header())
	}
	res, err := a.AwaitRun(t.Context(), id)
	if err != nil || res.Status != 201 || string(res.Body) != "42\n" {
		t.Fatalf("AwaitRun on A: %+v, %v", res, err)
	}
}
