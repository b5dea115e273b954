package oke_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/okengine/oke"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type getIn struct {
	ID    string `json:"id"`
	Limit int    `json:"limit"`
	Full  bool   `json:"full"`
}

type amountIn struct {
	Amount int64 `json:"amount"`
}

func (a amountIn) Validate() error {
	if a.Amount <= 0 {
		return errors.New("amount must be greater than 0")
	}
	return nil
}

func newApp(t *testing.T, cfg oke.Config, bind func(app *oke.App)) *oke.App {
	t.Helper()
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	app := oke.New(cfg)
	t.Cleanup(func() { app.Close(context.Background()) })
	bind(app)
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return app
}

func TestInputFromPathAndQuery(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.GET("/items/{id}"), oke.NewFlow("i.get", oke.Options{},
			func(_ context.Context, in getIn, _ *oke.Fx) (oke.Response[getIn], error) { return oke.OK(in), nil }))
	})
	w := do(app, "GET", "/items/it_9?limit=5&full=true", "")
	var got getIn
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got != (getIn{ID: "it_9", Limit: 5, Full: true}) {
		t.Fatalf("%d %s → %+v", w.Code, w.Body, got)
	}
	w = do(app, "GET", "/items/x?limit=many", "")
	if w.Code != 400 || !strings.Contains(w.Body.String(), `"InvalidInput"`) {
		t.Fatalf("bad query parameter: %d %s", w.Code, w.Body)
	}
}

func TestBodyLimitIs413(t *testing.T) {
	app := newApp(t, oke.Config{MaxBodyBytes: 64}, func(app *oke.App) {
		app.Handle(oke.POST("/x"), oke.NewFlow("b.limit", oke.Options{},
			func(_ context.Context, in map[string]string, _ *oke.Fx) (oke.Response[int], error) {
				return oke.OK(len(in)), nil
			}))
	})
	w := do(app, "POST", "/x", `{"a":"`+strings.Repeat("x", 100)+`"}`, "Idempotency-Key", "0123456789abcdef")
	if w.Code != 413 || !strings.Contains(w.Body.String(), `"PayloadTooLarge"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := do(app, "POST", "/x", `{"a":"b"}`); w.Code != 200 {
		t.Fatalf("small body: %d %s", w.Code, w.Body)
	}
}

func TestUnknownRoutesAreJSONEnvelopes(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/x"), unary("r.x", oke.Options{}))
	})
	if w := do(app, "GET", "/nope", ""); w.Code != 404 || !strings.Contains(w.Body.String(), `"NotFound"`) {
		t.Fatalf("404: %d %s", w.Code, w.Body)
	}
	w := do(app, "GET", "/x", "")
	if w.Code != 405 || w.Header().Get("Allow") != "POST" || !strings.Contains(w.Body.String(), `"MethodNotAllowed"`) {
		t.Fatalf("405: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

func TestPanicIsInternalErrorAndKeyRunsAgain(t *testing.T) {
	n := 0
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/p"), oke.NewFlow("p.panic", oke.Options{},
			func(context.Context, noIn, *oke.Fx) (oke.Response[int], error) {
				n++
				if n == 1 {
					panic("boom")
				}
				return oke.OK(n), nil
			}))
	})
	if w := do(app, "POST", "/p", "", "Idempotency-Key", "0123456789abcdef"); w.Code != 500 {
		t.Fatalf("panic: %d", w.Code)
	}
	if w := do(app, "POST", "/p", "", "Idempotency-Key", "0123456789abcdef"); w.Code != 200 {
		t.Fatalf("a panic before any effect must release the key: %d", w.Code)
	}
}

// TestMetricsCountExecutionsAndOutcomes: the series of DESIGN.md section 6.
func TestMetricsCountExecutionsAndOutcomes(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/c"), oke.NewFlow("m.charge", oke.Options{Idempotency: oke.Required},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				return oke.Created(in.Amount, ""), nil
			}))
	})
	const key = "0123456789abcdef"
	do(app, "POST", "/c", `{"amount":1}`, "Idempotency-Key", key)
	do(app, "POST", "/c", `{"amount":1}`, "Idempotency-Key", key)
	do(app, "POST", "/c", `{"amount":2}`, "Idempotency-Key", key)
	do(app, "POST", "/c", `{"amount":2}`, "Idempotency-Key", "short")
	do(app, "POST", "/c", `{"amount":2}`)
	metrics := do(app.MetricsHandler(), "GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`oke_flow_executions_total{flow="m.charge"} 1`,
		`oke_idempotency_outcomes_total{flow="m.charge",outcome="live"} 1`,
		`oke_idempotency_outcomes_total{flow="m.charge",outcome="replayed"} 1`,
		`oke_idempotency_outcomes_total{flow="m.charge",outcome="reused"} 1`,
		`oke_idempotency_outcomes_total{flow="m.charge",outcome="invalid"} 1`,
		`oke_idempotency_outcomes_total{flow="m.charge",outcome="missing"} 1`,
		`oke_idempotency_outcomes_total{flow="m.charge",outcome="in_progress"} 0`,
		`oke_idempotency_claim_seconds_count{flow="m.charge"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if n, err := testutil.GatherAndCount(app.Registry(), "oke_flow_executions_total"); err != nil || n != 1 {
		t.Fatalf("executions series: %d %v", n, err)
	}
}

func TestEmitReachesSubscribers(t *testing.T) {
	var got []oke.Event
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/e"), oke.NewFlow("e.emit", oke.Options{},
			func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int], error) {
				return oke.OK(0), fx.Emit(ctx, "thing.happened", in)
			}))
	})
	cancel := app.Subscribe(func(e oke.Event) { got = append(got, e) })
	do(app, "POST", "/e", `{"amount":3}`)
	cancel()
	do(app, "POST", "/e", `{"amount":4}`)
	if len(got) != 1 || got[0].Name != "thing.happened" || string(got[0].Data) != `{"amount":3}` || got[0].Flow != "e.emit" {
		t.Fatalf("events: %+v", got)
	}
}

var decodes, outDecodes atomic.Int64

// countedIn counts how often a request body is decoded.
type countedIn struct{ Amount int64 }

func (c *countedIn) UnmarshalJSON(b []byte) error {
	decodes.Add(1)
	var v struct {
		Amount int64 `json:"amount"`
	}
	err := json.Unmarshal(b, &v)
	c.Amount = v.Amount
	return err
}

// countedOut counts decodes of a response body (a replay must not decode
// the stored body: it is written back as stored bytes).
type countedOut struct {
	Amount int64 `json:"amount"`
}

func (c *countedOut) UnmarshalJSON(b []byte) error {
	outDecodes.Add(1)
	return nil
}

// TestReplayDecodesTheRequestOnceAndNeverTheStoredBody: a replayed request
// costs one JSON decode (its own input, needed for the fingerprint) and no
// decode of the stored response.
func TestReplayDecodesTheRequestOnceAndNeverTheStoredBody(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/c"), oke.NewFlow("r.counted", oke.Options{},
			func(ctx context.Context, in countedIn, fx *oke.Fx) (oke.Response[countedOut], error) {
				return oke.Created(countedOut{Amount: in.Amount}, ""), nil
			}))
	})
	const key = "replay-decode-key-01"
	do(app, "POST", "/c", `{"amount":7}`, "Idempotency-Key", key)
	decodes.Store(0)
	w := do(app, "POST", "/c", `{"amount":7}`, "Idempotency-Key", key)
	if w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("not replayed: %d %s", w.Code, w.Body)
	}
	if got := decodes.Load(); got != 1 {
		t.Fatalf("a replay decoded the request body %d times, want 1", got)
	}
	if got := outDecodes.Load(); got != 0 {
		t.Fatalf("a replay decoded the stored body %d times, want 0", got)
	}
}

func TestAllowUnknownFields(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/strict"), oke.NewFlow("u.strict", oke.Options{},
			func(_ context.Context, in amountIn, _ *oke.Fx) (oke.Response[int64], error) {
				return oke.OK(in.Amount), nil
			}))
		app.Handle(oke.POST("/lenient"), oke.NewFlow("u.lenient", oke.Options{AllowUnknownFields: true},
			func(_ context.Context, in amountIn, _ *oke.Fx) (oke.Response[int64], error) {
				return oke.OK(in.Amount), nil
			}))
	})
	if w := do(app, "POST", "/strict", `{"amount":1,"extra":true}`); w.Code != 400 || !strings.Contains(w.Body.String(), "UnknownField") {
		t.Fatalf("strict: %d %s", w.Code, w.Body)
	}
	if w := do(app, "POST", "/lenient", `{"amount":1,"extra":true}`); w.Code != 200 {
		t.Fatalf("lenient: %d %s", w.Code, w.Body)
	}
}

// TestShutdownEndsLiveFeeds: App.Shutdown (for http.Server.RegisterOnShutdown)
// cancels the context of every live feed at once, so that a graceful
// shutdown does not wait for feeds that never end by themselves.
func TestShutdownEndsLiveFeeds(t *testing.T) {
	started := make(chan struct{})
	ended := make(chan error, 1)
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.GET("/feed"), oke.NewLive("s.feed", oke.Options{},
			func(ctx context.Context, in struct{}, fx *oke.Fx, send func(oke.Event) error) error {
				close(started)
				<-ctx.Done()
				ended <- ctx.Err()
				return nil
			}))
	})
	srv := httptest.NewServer(app)
	defer srv.Close()
	srv.Config.RegisterOnShutdown(app.Shutdown)
	resp, err := http.Get(srv.URL + "/feed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-started
	done := make(chan error, 1)
	go func() { done <- srv.Config.Shutdown(context.Background()) }()
	if err := <-ended; err == nil {
		t.Fatal("the feed's context ended without an error")
	}
	io.Copy(io.Discard, resp.Body)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestBodyMediaType: a body is read as JSON when its Content-Type is JSON,
// absent, or curl -d's form encoding; any other media type is 415
// UnsupportedMediaType and the flow does not run.
func TestBodyMediaType(t *testing.T) {
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/m"), oke.NewFlow("m.echo", oke.Options{Effects: []oke.Effect{}},
			func(_ context.Context, in amountIn, _ *oke.Fx) (oke.Response[int64], error) {
				return oke.OK(in.Amount), nil
			}))
	})
	for _, tc := range []struct {
		ct   string
		want int
	}{
		{"", 200},
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"application/merge-patch+json", 200},
		{"application/x-www-form-urlencoded", 200},
		{"text/plain", 415},
		{"multipart/form-data; boundary=x", 415},
		{"nonsense", 415},
	} {
		var hdr []string
		if tc.ct != "" {
			hdr = []string{"Content-Type", tc.ct}
		}
		w := do(app, "POST", "/m", `{"amount":1}`, hdr...)
		if w.Code != tc.want || tc.want == 415 && !strings.Contains(w.Body.String(), "UnsupportedMediaType") {
			t.Errorf("Content-Type %q: %d %s, want %d", tc.ct, w.Code, w.Body, tc.want)
		}
	}
}
