package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// startTracing installs an OTLP/HTTP trace exporter as the global
// TracerProvider (which oke's App uses when Config.TracerProvider is nil)
// when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set; the exporter reads the rest of the OTEL_EXPORTER_OTLP_* variables
// itself. It returns the function that flushes and stops it, bounded by
// timeout; with neither variable set it installs nothing (no span is made)
// and returns a no-op.
func startTracing(ctx context.Context, stderr io.Writer) (stop func(timeout time.Duration), err error) {
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if endpoint == "" {
		return func(time.Duration) {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry: the OTLP exporter for %s: %w", endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("payments")))
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	fmt.Fprintf(stderr, "payments: exporting traces over OTLP/HTTP to %s\n", endpoint)
	return func(timeout time.Duration) {
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			fmt.Fprintf(stderr, "payments: OpenTelemetry: flush the last spans: %v\n", err)
		}
	}, nil
}
