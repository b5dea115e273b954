package oke_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/okengine/oke"
	"github.com/okengine/oke/admin"
	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/driver/file"
	"github.com/okengine/oke/driver/memory"
	"github.com/okengine/oke/driver/postgres"
	"github.com/okengine/oke/internal/pgtest"
)

type chargeIn struct {
	Card   string `json:"card"`
	Amount int    `json:"amount"`
}

// The secrets a span must never carry: the client's key and the body.
const (
	traceKey  = "key-secret-8f2c1d"
	traceCard = "card-4242-secret"
)

// tracedApp is an app on d with an in-memory span recorder as its
// TracerProvider, a log written to logs, and a durable, keyed flow whose
// step fails its first attempt.
func tracedApp(t *testing.T, d driver.Driver, logs *bytes.Buffer) (*oke.App, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	var failed atomic.Bool
	app := newApp(t, oke.Config{Driver: d, TracerProvider: tp, PollInterval: -1,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, func(app *oke.App) {
		app.Handle(oke.POST("/charges"), oke.NewFlow("trace.charge", oke.Options{Durable: true},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[string], error) {
				id, err := oke.Step(ctx, "charge", func(ctx context.Context) (string, error) {
					if !failed.Swap(true) {
						return "", errors.New("provider blip")
					}
					return "ch_1", nil
				}, oke.Retry(oke.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, Jitter: -1}))
				return oke.Created(id, "/charges/"+id), err
			}))
		app.Handle(oke.POST("/broken"), oke.NewFlow("trace.broken", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[string], error) {
				return oke.Response[string]{}, errors.New("a bug")
			}))
	})
	return app, rec
}

// spanTree indexes recorded spans by span ID.
type spanTree map[trace.SpanID]sdktrace.ReadOnlySpan

func treeOf(spans []sdktrace.ReadOnlySpan) spanTree {
	t := spanTree{}
	for _, s := range spans {
		t[s.SpanContext().SpanID()] = s
	}
	return t
}

// path is the names of s's ancestors within the tree, root first, then s's.
func (t spanTree) path(s sdktrace.ReadOnlySpan) string {
	var names []string
	for cur, ok := s, true; ok; cur, ok = t[cur.Parent().SpanID()] {
		names = append([]string{cur.Name()}, names...)
	}
	return strings.Join(names, " > ")
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestTracing: a keyed durable request is one trace — its server span,
// the flow, the step, each attempt, the store calls — with its outcome,
// claim and the key's hash, never the key or the body; the replay's span
// says "replay" and links to the trace that produced the answer, which
// the row and the run keep; the log lines of a traced request carry its
// trace_id. On the memory, file and Postgres drivers.
func TestTracing(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    func(t *testing.T) driver.Driver
	}{
		{"memory", func(*testing.T) driver.Driver { return memory.New() }},
		{"file", func(t *testing.T) driver.Driver {
			d, err := file.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			return d
		}},
		{"postgres", func(t *testing.T) driver.Driver {
			_, dsn := pgtest.NewDatabase(t, "oke_tracing")
			c := pgtest.Charge(t, pgtest.DriverConns(2))
			d, err := postgres.Open(context.Background(), c.DSN(pgtest.WithPoolSize(dsn, 2)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if err := d.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return d
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d(t)
			var logs bytes.Buffer
			app, rec := tracedApp(t, d, &logs)
			body := `{"card":"` + traceCard + `","amount":100}`
			if w := do(app, "POST", "/charges", body, "Idempotency-Key", traceKey); w.Code != 201 {
				t.Fatalf("live: %d %s", w.Code, w.Body)
			}
			live := rec.Ended()
			tree := treeOf(live)
			var server sdktrace.ReadOnlySpan
			paths := map[string]int{}
			for _, s := range live {
				paths[tree.path(s)]++
				if s.SpanKind() == trace.SpanKindServer {
					server = s
				}
			}
			for _, want := range []struct {
				path string
				n    int
			}{
				{"POST /charges", 1},
				{"POST /charges > oke.store claim", 1},
				{"POST /charges > oke.flow trace.charge", 1},
				{"POST /charges > oke.store create_run", 1},
				{"POST /charges > oke.flow trace.charge > oke.step charge", 1},
				{"POST /charges > oke.flow trace.charge > oke.step charge > oke.attempt", 2},
				{"POST /charges > oke.flow trace.charge > oke.step charge > oke.store save_step", 1},
				{"POST /charges > oke.store finish_run", 1},
				{"POST /charges > oke.store complete", 1},
			} {
				if paths[want.path] != want.n {
					t.Errorf("%d spans %q, want %d; the tree: %v", paths[want.path], want.path, want.n, paths)
				}
			}
			if server == nil {
				t.Fatal("no server span")
			}
			for k, want := range map[string]string{"oke.flow": "trace.charge", "oke.idempotency.outcome": "live",
				"oke.idempotency.claim": "first"} {
				if got := attr(server, k); got != want {
					t.Errorf("server span %s = %q, want %q", k, got, want)
				}
			}
			if h := attr(server, "oke.idempotency.key_hash"); len(h) != 16 {
				t.Errorf("key hash %q: want 16 hex digits", h)
			}
			var failedAttempts int
			for _, s := range live {
				if s.Name() == "oke.attempt" && s.Status().Code.String() == "Error" {
					failedAttempts++
				}
			}
			if failedAttempts != 1 {
				t.Errorf("%d attempts with an error status, want 1 (the first)", failedAttempts)
			}
			traceID := server.SpanContext().TraceID()

			// The claim histogram's exemplar names the trace (OpenMetrics only).
			m := do(app.MetricsHandler(), "GET", "/metrics", "", "Accept", "application/openmetrics-text; version=1.0.0")
			if !strings.Contains(m.Body.String(), `trace_id="`+traceID.String()+`"`) {
				t.Errorf("no exemplar with trace_id=%s in oke_idempotency_claim_seconds", traceID)
			}
			if p := do(app.MetricsHandler(), "GET", "/metrics", ""); strings.Contains(p.Body.String(), "trace_id") {
				t.Error("the plain text format carries exemplars")
			}

			// The row and the run keep the trace that produced them.
			row, err := d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "trace.charge", Key: traceKey})
			if err != nil {
				t.Fatal(err)
			}
			if v := admin.ViewRow(row); v.TraceID != traceID.String() {
				t.Errorf("row's traceId %q, want %q", v.TraceID, traceID)
			}
			run, steps, err := d.(driver.Journal).GetRun(context.Background(), row.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if v := admin.ViewRun(run, steps); v.TraceID != traceID.String() {
				t.Errorf("run's traceId %q, want %q", v.TraceID, traceID)
			}

			// The replay: its own trace, outcome replay, a link to the live one.
			rec.Reset()
			if w := do(app, "POST", "/charges", body, "Idempotency-Key", traceKey); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay: %d %v", w.Code, w.Header())
			}
			var replay sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindServer {
					replay = s
				}
				if strings.HasPrefix(s.Name(), "oke.flow") {
					t.Errorf("the replay ran the flow: span %q", s.Name())
				}
			}
			if replay == nil {
				t.Fatal("no server span for the replay")
			}
			if got := attr(replay, "oke.idempotency.outcome"); got != "replay" {
				t.Errorf("replay outcome %q", got)
			}
			if replay.SpanContext().TraceID() == traceID {
				t.Error("the replay is in the live request's trace; want a trace of its own")
			}
			if l := replay.Links(); len(l) != 1 || l[0].SpanContext.TraceID() != traceID ||
				l[0].SpanContext.SpanID() != server.SpanContext().SpanID() {
				t.Errorf("replay links %+v, want one to %s/%s", l, traceID, server.SpanContext().SpanID())
			} else if a := l[0].Attributes; len(a) != 1 || a[0].Value.Emit() != "produced_response" {
				t.Errorf("replay link attributes %v, want oke.link=produced_response", a)
			}
			if attr(replay, "oke.idempotency.key_hash") != attr(server, "oke.idempotency.key_hash") {
				t.Error("the same key hashes differently in the live request and its replay")
			}

			// The engine's log line of a failed flow carries its trace.
			rec.Reset()
			if w := do(app, "POST", "/broken", body); w.Code != 500 {
				t.Fatalf("broken: %d %s", w.Code, w.Body)
			}
			var broken sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindServer {
					broken = s
				}
			}
			if broken == nil {
				t.Fatal("no server span for the failed request")
			}
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "oke: flow failed") {
					line = l
				}
			}
			if want := "trace_id=" + broken.SpanContext().TraceID().String(); !strings.Contains(line, want) ||
				!strings.Contains(line, "span_id=") {
				t.Errorf("the failure's log line %q carries no %s and span_id", line, want)
			}

			// No span, of either request, carries the key or the body.
			for _, s := range append(live, rec.Ended()...) {
				for _, kv := range s.Attributes() {
					if v := kv.Value.Emit(); strings.Contains(v, traceKey) || strings.Contains(v, traceCard) {
						t.Errorf("span %q attribute %s = %q gives away the key or the body", s.Name(), kv.Key, v)
					}
				}
				if strings.Contains(s.Name(), traceKey) {
					t.Errorf("span name %q gives away the key", s.Name())
				}
			}
		})
	}
}

// TestNoProviderNoTraceInRows: with the default (no-op) provider nothing
// is stored for tracing and logs carry no trace ids.
func TestNoProviderNoTraceInRows(t *testing.T) {
	d := memory.New()
	var logs bytes.Buffer
	app := newApp(t, oke.Config{Driver: d, PollInterval: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, func(app *oke.App) {
		app.Handle(oke.POST("/c"), oke.NewFlow("trace.none", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[string], error) {
				return oke.OK("ok"), nil
			}))
		app.Handle(oke.POST("/bad"), oke.NewFlow("trace.bad", oke.Options{},
			func(ctx context.Context, in chargeIn, fx *oke.Fx) (oke.Response[string], error) {
				return oke.OK("ok"), errors.New("a bug")
			}))
	})
	if w := do(app, "POST", "/c", `{"card":"c","amount":1}`, "Idempotency-Key", "k1-0123456789abcdef"); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	row, err := d.Get(context.Background(), driver.Key{Tenant: "default", Principal: "anon", Flow: "trace.none", Key: "k1-0123456789abcdef"})
	if err != nil || row.Response == nil || row.Response.Trace != "" {
		t.Fatalf("row %+v, %v: want a response with no trace", row, err)
	}
	do(app, "POST", "/bad", `{"card":"c","amount":1}`)
	if !strings.Contains(logs.String(), "oke: flow failed") || strings.Contains(logs.String(), "trace_id") {
		t.Errorf("untraced log line with a trace_id: %s", logs.String())
	}
}
