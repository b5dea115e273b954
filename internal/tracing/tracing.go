// Package tracing is how oke writes OpenTelemetry spans: through the otel
// API only, with the TracerProvider the app was given (Config.TracerProvider,
// else otel.GetTracerProvider(), a no-op until a program installs one).
//
// The root spans (a request's server span, a background run's span) are
// started with the app's tracer; every other span is a child, started only
// when its parent span records (Child), with the parent's own provider. With
// no provider installed, or a request its sampler dropped, the engine's
// inner spans cost one context look-up each and allocate nothing.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of oke's spans.
const Scope = "github.com/okengine/oke"

// The attributes oke sets.
const (
	Flow      = attribute.Key("oke.flow")
	Outcome   = attribute.Key("oke.idempotency.outcome")
	KeyHash   = attribute.Key("oke.idempotency.key_hash")
	Claim     = attribute.Key("oke.idempotency.claim")
	RunID     = attribute.Key("oke.run.id")
	Step      = attribute.Key("oke.step")
	Attempt   = attribute.Key("oke.step.attempt")
	StoreOp   = attribute.Key("oke.store.op")
	LinkKind  = attribute.Key("oke.link")
	RouteAttr = attribute.Key("http.route")
	Method    = attribute.Key("http.request.method")
	Status    = attribute.Key("http.response.status_code")
)

var (
	childOpts  = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	clientOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// on is set once any app of the process has a provider (On). Until then
// no context is asked for its span: a look-up in a context.WithoutCancel
// allocates, and the request path makes several.
var on atomic.Bool

// On says that an app of the process has a TracerProvider: spans may record
// from now on.
func On() {
	if !on.Load() {
		on.Store(true)
	}
}

// span is ctx's span, or the no-op span without looking while no app
// traces (On).
func span(ctx context.Context) trace.Span {
	if !on.Load() {
		return noSpan
	}
	return trace.SpanFromContext(ctx)
}

var noSpan = trace.SpanFromContext(context.Background())

// Recording reports whether ctx's span records (is sampled and not a
// no-op): only then are children started and attributes set.
func Recording(ctx context.Context) bool { return span(ctx).IsRecording() }

// Span is ctx's span (trace.SpanFromContext), without looking while no
// app traces.
func Span(ctx context.Context) trace.Span { return span(ctx) }

// Child starts span name under ctx's span when that span records, with
// attrs; otherwise it returns ctx and ctx's own span (whose End and
// SetAttributes do nothing), allocating nothing.
func Child(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	parent := span(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	ctx, span := parent.TracerProvider().Tracer(Scope).Start(ctx, name, childOpts...)
	if len(attrs) > 0 {
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

// End ends span, recording err (when not nil) as its error status.
func End(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Store starts the span of one store call, op (e.g. "claim", "save_step"),
// under ctx's span when that span records. end ends it with the call's
// error and returns that error.
func Store(ctx context.Context, op string) (context.Context, func(error) error) {
	parent := span(ctx)
	if !parent.IsRecording() {
		return ctx, nil
	}
	ctx, span := parent.TracerProvider().Tracer(Scope).Start(ctx, "oke.store "+op, clientOpts...)
	span.SetAttributes(StoreOp.String(op))
	return ctx, func(err error) error {
		End(span, err)
		return err
	}
}

// KeyHashOf is the attribute value that names a scoped Idempotency-Key
// without giving it away: the first 16 hex digits of the SHA-256 of its
// scope and key, each part length-prefixed so that no two keys collide by
// concatenation.
func KeyHashOf(tenant, principal, flow, key string) string {
	h := sha256.New()
	for _, s := range [...]string{tenant, principal, flow, key} {
		var n [4]byte
		l := len(s)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// Format is how a span context is stored with a row or a run
// (driver.Response.Trace, driver.Run.Trace): its trace ID and span ID in
// hex, joined by "-". It is "" for an invalid (no-op, unsampled) one.
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [32 + 1 + 16]byte
	hex.Encode(b[:32], tid[:])
	b[32] = '-'
	hex.Encode(b[33:], sid[:])
	return string(b[:])
}

// FromContext is Format of ctx's span, when it records; else "".
func FromContext(ctx context.Context) string {
	s := span(ctx)
	if !s.IsRecording() {
		return ""
	}
	return Format(s.SpanContext())
}

// Parse reads what Format wrote, as a remote span context (for a link).
func Parse(s string) (trace.SpanContext, bool) {
	if len(s) != 32+1+16 || s[32] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(s[:32])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(s[33:])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return sc, sc.IsValid()
}

// TraceID is the trace ID part of a stored trace (Format), or "".
func TraceID(s string) string {
	if len(s) < 32 {
		return ""
	}
	return s[:32]
}

// Link adds to ctx's span, when it records, a link to the span stored as
// trace (Format): the request that produced the answer being replayed, or
// that created the run being resumed.
//
// The link's oke.link attribute says which: "produced_response" or
// "created_run".
func Link(ctx context.Context, stored, kind string) {
	s := span(ctx)
	if !s.IsRecording() {
		return
	}
	if sc, ok := Parse(stored); ok {
		s.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{LinkKind.String(kind)}})
	}
}

// Handler wraps a slog.Handler: a record logged with a context whose span
// is valid carries trace_id and span_id.
type Handler struct{ slog.Handler }

// Handle implements slog.Handler.
func (h Handler) Handle(ctx context.Context, r slog.Record) error {
	if sc := span(ctx).SpanContext(); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h Handler) WithAttrs(as []slog.Attr) slog.Handler { return Handler{h.Handler.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h Handler) WithGroup(name string) slog.Handler { return Handler{h.Handler.WithGroup(name)} }
