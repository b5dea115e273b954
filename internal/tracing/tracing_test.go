package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestStoredTraceRoundTrips: what Format stores, Parse reads back as the
// same trace and span; anything else is no trace.
func TestStoredTraceRoundTrips(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	s := Format(sc)
	if s != "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331" {
		t.Fatalf("Format = %q", s)
	}
	got, ok := Parse(s)
	if !ok || got.TraceID() != tid || got.SpanID() != sid {
		t.Fatalf("Parse(%q) = %v, %v", s, got, ok)
	}
	if TraceID(s) != tid.String() {
		t.Errorf("TraceID(%q) = %q", s, TraceID(s))
	}
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	for _, bad := range []string{"", "x", s[:40], strings.Replace(s, "-", "_", 1), strings.Repeat("0", 32) + "-" + strings.Repeat("0", 16)} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if Format(unsampled) != "" || Format(trace.SpanContext{}) != "" {
		t.Error("an unsampled or invalid span context is stored as a trace")
	}
}

// TestKeyHash: the same scoped key hashes the same; another scope or key,
// or parts that only concatenate alike, differently; the key is not in it.
func TestKeyHash(t *testing.T) {
	h := KeyHashOf("t", "p", "f", "key-0123456789abcdef")
	if len(h) != 16 || h != KeyHashOf("t", "p", "f", "key-0123456789abcdef") {
		t.Fatalf("hash %q", h)
	}
	for _, other := range [][4]string{{"t2", "p", "f", "key-0123456789abcdef"}, {"t", "p", "f", "key-0123456789abcdeg"}, {"tp", "", "f", "key-0123456789abcdef"}} {
		if KeyHashOf(other[0], other[1], other[2], other[3]) == h {
			t.Errorf("%v hashes as the original", other)
		}
	}
}

// TestHandlerAddsTraceIDs: a record logged with a span's context carries
// its trace_id and span_id; one without, none.
func TestHandlerAddsTraceIDs(t *testing.T) {
	On()
	var buf bytes.Buffer
	log := slog.New(Handler{slog.NewTextHandler(&buf, nil)}).With("app", "x")
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	log.InfoContext(ctx, "traced")
	log.Info("plain")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "trace_id="+tid.String()) || !strings.Contains(lines[0], "span_id="+sid.String()) ||
		strings.Contains(lines[1], "trace_id") {
		t.Fatalf("log:\n%s", buf.String())
	}
}
