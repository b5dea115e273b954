package oke_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/okengine/oke"
)

// syncLog is a log the app writes to.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// contractFlow is what oke extract writes for a unary POST flow with no
// options at /path, whose code has effects.
func contractFlow(name, path string, effects ...oke.Effect) oke.ContractFlow {
	return oke.ContractFlow{Name: name, Shape: "unary", Idempotency: oke.ContractIdempotency{Mode: "auto"},
		Bindings: []oke.ContractBinding{{Kind: "http", Method: "POST", Path: path}}, Effects: effects}
}

// TestHeaderHonoredFromInferredEffects: spec 004 decides from the flow's
// inferred effects whether Idempotency-Key is honored. A POST flow whose
// code only reads (no declared effects) ignores it: the same key with two
// bodies is two live answers, not a 422. A POST flow that writes through a
// helper honors it.
func TestHeaderHonoredFromInferredEffects(t *testing.T) {
	oke.RegisterContract(oke.Contract{Version: 1, Flows: []oke.ContractFlow{
		contractFlow("contract.quote", "/quote", oke.EffectRead),
		contractFlow("contract.save", "/save", oke.EffectWrite),
	}})
	echo := func(name string) *oke.Flow[amountIn, int64] {
		return oke.NewFlow(name, oke.Options{}, func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
			return oke.OK(in.Amount), nil
		})
	}
	app := newApp(t, oke.Config{}, func(app *oke.App) {
		app.Handle(oke.POST("/quote"), echo("contract.quote"))
		app.Handle(oke.POST("/save"), echo("contract.save"))
	})
	const key = "contract-test-key-0001"
	for i, body := range []string{`{"amount":1}`, `{"amount":2}`} {
		w := do(app, "POST", "/quote", body, "Idempotency-Key", key)
		if w.Code != 200 || w.Header().Get("Idempotent-Replayed") != "" || w.Body.String() != []string{"1\n", "2\n"}[i] {
			t.Fatalf("read-only POST, body %s: %d %q (replayed %q), want a live answer", body, w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
		}
	}
	if w := do(app, "POST", "/save", `{"amount":1}`, "Idempotency-Key", key); w.Code != 200 {
		t.Fatalf("writing POST: %d %s", w.Code, w.Body)
	}
	if w := do(app, "POST", "/save", `{"amount":2}`, "Idempotency-Key", key); w.Code != 422 {
		t.Fatalf("writing POST with another body under the key: %d %s, want 422", w.Code, w.Body)
	}
	for _, f := range app.Flows() {
		if want := f.Name == "contract.save"; f.Honored != want {
			t.Errorf("flow %s: honored %v, want %v", f.Name, f.Honored, want)
		}
	}
}

// TestStaleOrMissingContractFallsBack: a flow whose generated contract no
// longer matches its options or bindings, or that has none, does not stop
// Start: Start logs a warning naming the flow and the fix, and the flow
// honors the header from its declared effects (undeclared: assumed to
// write).
func TestStaleOrMissingContractFallsBack(t *testing.T) {
	stale := contractFlow("contract.stale", "/stale", oke.EffectRead)
	stale.Idempotency.TTL = "1h" // the code now says 2h
	moved := contractFlow("contract.moved", "/old-path", oke.EffectRead)
	oke.RegisterContract(oke.Contract{Version: 1, Flows: []oke.ContractFlow{stale, moved}})
	var log syncLog
	app := newApp(t, oke.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}, func(app *oke.App) {
		h := func(name string, opts oke.Options) *oke.Flow[amountIn, int64] {
			return oke.NewFlow(name, opts, func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
				return oke.OK(in.Amount), nil
			})
		}
		app.Handle(oke.POST("/stale"), h("contract.stale", oke.Options{Idempotency: oke.Idempotency{TTL: "2h"}}))
		app.Handle(oke.POST("/new-path"), h("contract.moved", oke.Options{}))
		app.Handle(oke.POST("/none"), h("contract.none", oke.Options{}))
	})
	out := log.String()
	for _, want := range []string{
		`flow \"contract.stale\": its generated contract is stale (Idempotency.TTL is \"2h\", the contract's \"1h\")`,
		`flow \"contract.moved\": its generated contract is stale (binding POST /new-path is not in the contract)`,
		"contract.none", "have no generated contract", "go generate",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	for _, path := range []string{"/stale", "/new-path", "/none"} {
		do(app, "POST", path, `{"amount":1}`, "Idempotency-Key", "contract-stale-key-01")
		if w := do(app, "POST", path, `{"amount":2}`, "Idempotency-Key", "contract-stale-key-01"); w.Code != 422 {
			t.Errorf("%s falls back to undeclared effects (assumed to write): another body under the key got %d, want 422", path, w.Code)
		}
	}
}

// TestRequiredNeedsAnInferredQualifyingEffect: Required on a flow whose code
// only reads fails Start (as extract does), naming the flow and the fix.
func TestRequiredNeedsAnInferredQualifyingEffect(t *testing.T) {
	c := contractFlow("contract.required", "/r", oke.EffectRead)
	c.Idempotency.Mode = "required"
	oke.RegisterContract(oke.Contract{Version: 1, Flows: []oke.ContractFlow{c}})
	app := oke.New(oke.Config{SweepInterval: -1, Logger: quiet()})
	t.Cleanup(func() { app.Close(context.Background()) })
	app.Handle(oke.POST("/r"), oke.NewFlow("contract.required", oke.Options{Idempotency: oke.Required},
		func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
			return oke.OK(in.Amount), nil
		}))
	err := app.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `flow "contract.required"`) || !strings.Contains(err.Error(), "Required") {
		t.Fatalf("Start: %v", err)
	}
}

// TestMissingContractIsToldOnce: apps of the same flows started one after
// the other with one logger (a test suite, a benchmark) log the missing
// contract once, not once per app.
func TestMissingContractIsToldOnce(t *testing.T) {
	var log syncLog
	logger := slog.New(slog.NewTextHandler(&log, nil))
	for range 3 {
		newApp(t, oke.Config{Logger: logger}, func(app *oke.App) {
			app.Handle(oke.POST("/once"), oke.NewFlow("contract.once", oke.Options{},
				func(ctx context.Context, in amountIn, fx *oke.Fx) (oke.Response[int64], error) {
					return oke.OK(in.Amount), nil
				}))
		})
	}
	if n := strings.Count(log.String(), "contract.once"); n != 1 {
		t.Errorf("the missing contract was logged %d times over three apps, want once:\n%s", n, log.String())
	}
}
