package oke

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/okengine/oke/driver"
	"github.com/okengine/oke/internal/tracing"
)

// serverSpan is how a request's span starts: as the server's.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// serve runs one request to rt in a server span of its own (docs/tracing.md):
// a child of the caller's span when the request carries one (the global
// propagator's headers, or a span already in its context, e.g. otelhttp's).
// The span is put in the request's context only when it records, so that
// with no provider installed a request allocates no new *http.Request.
func (a *App) serve(rt *route, w http.ResponseWriter, r *http.Request) {
	tr := a.tracing()
	if tr == nil { // no provider installed: no span at all
		a.serveRequest(rt, w, r)
		return
	}
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	ctx, span := tr.Start(ctx, rt.span, serverSpan...)
	if !span.IsRecording() {
		a.serveRequest(rt, w, r)
		return
	}
	defer span.End()
	span.SetAttributes(tracing.Flow.String(rt.f.name), tracing.Method.String(r.Method),
		tracing.RouteAttr.String(rt.span[len(rt.b.Method)+1:]))
	a.serveRequest(rt, w, r.WithContext(ctx))
}

// traceKey sets the attributes of a keyed request on its span, when it
// records: the claim, and a hash of the scoped key (never the key itself).
func traceKey(ctx context.Context, f *flow, key driver.Key) {
	span := tracing.Span(ctx)
	if !span.IsRecording() {
		return
	}
	claim := f.claim
	if f.coalesced {
		claim = ClaimInTx
	}
	span.SetAttributes(tracing.KeyHash.String(tracing.KeyHashOf(key.Tenant, key.Principal, key.Flow, key.Key)),
		tracing.Claim.String(claim.String()))
}

// noProvider is what otel.GetTracerProvider returns until a program
// installs a provider: a no-op that would forward to one installed later.
var noProvider = otel.GetTracerProvider()

// tracerOf is a provider and its tracer of oke's scope.
type tracerOf struct {
	tp trace.TracerProvider
	tr trace.Tracer
}

// tracing returns the tracer of the app's root spans, or nil when no
// provider is installed (Config.TracerProvider is nil or a noop one, and
// otel.SetTracerProvider was not called): then a request starts no span and
// allocates nothing for tracing.
func (a *App) tracing() trace.Tracer {
	if a.cfg.TracerProvider != nil {
		return a.tracer
	}
	tp := otel.GetTracerProvider()
	if tp == noProvider {
		return nil
	}
	if cur := a.globalTracer.Load(); cur != nil && cur.tp == tp {
		return cur.tr
	}
	tracing.On()
	t := &tracerOf{tp: tp, tr: tp.Tracer(tracing.Scope)}
	a.globalTracer.Store(t)
	return t.tr
}

// spanOutcomes name the outcomes (oke_idempotency_outcomes_total's) on a
// span's oke.idempotency.outcome.
var spanOutcomes = map[string]string{OutcomeReplayed: "replay"}

// count counts the request's idempotency outcome o, and sets it on the
// request's span when that records.
func (fm *flowMetrics) count(ctx context.Context, o string) {
	fm.outcomes[o].Inc()
	span := tracing.Span(ctx)
	if !span.IsRecording() {
		return
	}
	name := o
	if n, ok := spanOutcomes[o]; ok {
		name = n
	}
	span.SetAttributes(tracing.Outcome.String(name))
}

// observe records v in a histogram: with the trace ID of ctx's span as its
// exemplar when the request is sampled.
func observe(ctx context.Context, h prometheus.Observer, v float64) {
	if sc := tracing.Span(ctx).SpanContext(); sc.IsSampled() {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	h.Observe(v)
}

// flowSpan starts the span of one call of the flow's function under ctx's
// span, when that records.
func flowSpan(ctx context.Context, f *flow, runID string) (context.Context, trace.Span) {
	if !tracing.Recording(ctx) {
		return ctx, tracing.Span(ctx)
	}
	ctx, span := tracing.Child(ctx, "oke.flow "+f.name, tracing.Flow.String(f.name))
	if runID != "" {
		span.SetAttributes(tracing.RunID.String(runID))
	}
	return ctx, span
}

// stepSpan starts the span of a durable step, seq, that runs (a saved
// step, replayed, has none) under ctx's span, when that records.
func stepSpan(ctx context.Context, name string, seq int) (context.Context, trace.Span) {
	if !tracing.Recording(ctx) {
		return ctx, tracing.Span(ctx)
	}
	return tracing.Child(ctx, "oke.step "+name, tracing.Step.String(name), attribute.Int("oke.step.seq", seq))
}

// attempt runs one attempt, n, of a step's fn in a span of its own when
// the step's span records.
func attempt[T any](ctx context.Context, n int, fn func(ctx context.Context) (T, error)) (v T, err error) {
	if !tracing.Recording(ctx) {
		return fn(ctx)
	}
	actx, span := tracing.Child(ctx, "oke.attempt", tracing.Attempt.Int(n))
	defer func() { tracing.End(span, err) }()
	return fn(actx)
}
