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
	"github.com/okengine/oke/internal/pgtest"
)

// TestPreferWaitAcrossInstances: two apps on one database (two instances
// of one service). A request to B with "Prefer: wait" while its key's first
// request runs on A is held until A finishes, then answered A's stored
// response — B learns of it from the database, not from A's process.
// Without the header B answers 409.
func TestPreferWaitAcrossInstances(t *testing.T) {
	pgtest.Need(t, 2*pgtest.DriverConns(testPool))
	da := newDriver(t)
	db := sameSchema(t, da)
	release, started := make(chan struct{}), make(chan struct{})
	ran := 0
	newApp := func(d oke.Config) *oke.App {
		app := oke.New(d)
		app.Handle(oke.POST("/slow"), oke.NewFlow("pw.slow", oke.Options{},
			func(ctx context.Context, in struct{ N int }, fx *oke.Fx) (oke.Response[int], error) {
				ran++
				fx.Raw(ctx, "write", func(context.Context) error { return nil })
				close(started)
				<-release
				return oke.Created(in.N, "/slow/1"), nil
			}))
		if err := app.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { app.Close(context.Background()) })
		return app
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := newApp(oke.Config{Driver: da, SweepInterval: -1, PollInterval: -1, Logger: quiet})
	b := newApp(oke.Config{Driver: db, SweepInterval: -1, PollInterval: -1, Logger: quiet})
	post := func(app *oke.App, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/slow", strings.NewReader(`{"N":7}`))
		r.Header.Set("Idempotency-Key", "prefer-wait-across-1")
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- post(a) }()
	<-started
	if w := post(b); w.Code != http.StatusConflict {
		t.Fatalf("B without Prefer: wait: %d %s, want 409", w.Code, w.Body)
	}
	held := make(chan *httptest.ResponseRecorder)
	go func() { held <- post(b, "Prefer", "wait=30") }()
	for deadline := time.Now().Add(time.Minute); waitingOn(t, b) != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B never held the request")
		}
	}
	close(release)
	f, w := <-first, <-held
	if f.Code != 201 || w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || w.Body.String() != f.Body.String() ||
		w.Header().Get("Preference-Applied") != "wait=30" {
		t.Fatalf("A: %d %s; B held: %d %v %s", f.Code, f.Body, w.Code, w.Header(), w.Body)
	}
	if ran != 1 {
		t.Fatalf("the flow ran %d times, want once", ran)
	}
}

// waitingOn is app's oke_idempotency_waiting gauge, summed over flows.
func waitingOn(t *testing.T, app *oke.App) float64 {
	t.Helper()
	mfs, err := app.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "oke_idempotency_waiting" {
			for _, m := range mf.GetMetric() {
				n += m.GetGauge().GetValue()
			}
		}
	}
	return n
}
