package app_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
)

// TestRunExportsOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, the demo
// sends its spans over OTLP/HTTP, and flushes the last ones as it stops:
// the collector (a fake one here) gets the charge's server span, named
// after its route, with the flow's name.
func TestRunExportsOTLP(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == "POST" && r.URL.Path == "/v1/traces" {
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")
	prev := otel.GetTracerProvider()
	defer otel.SetTracerProvider(prev)

	url, stderr, stop := runDemo(t)
	do(t, url, "POST", "/charges", `{"amount":1200,"currency":"usd"}`, "Idempotency-Key", "otlp-test-key-000001").want(t, 201, "")
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := bytes.Join(bodies, nil)
	for _, want := range []string{"POST /charges", "payments.charge", "oke.idempotency.outcome"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the collector got %d export requests (%d bytes) with no %q; stderr:\n%s", len(bodies), len(all), want, stderr.String())
		}
	}
}

// TestRunWithoutOTLPExportsNothing: without the variable, no exporter.
func TestRunWithoutOTLPExportsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	_, stderr, stop := runDemo(t)
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if bytes.Contains([]byte(stderr.String()), []byte("exporting traces")) {
		t.Fatalf("an exporter started with no endpoint set: %s", stderr.String())
	}
}
