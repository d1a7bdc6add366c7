package telemetry

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestNewOff(t *testing.T) {
	p, err := New(context.Background(), Config{Getenv: envOf(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() || p.TracerProvider() != nil {
		t.Errorf("tracing on with no OTEL_* variable")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown of an off provider: %v", err)
	}
}

func TestNewRefusesWhatItCannotHonour(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, `OTEL_TRACES_EXPORTER="jaeger"`},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, `OTEL_EXPORTER_OTLP_PROTOCOL="grpc" is not supported; use http/protobuf`},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json" is not supported; use http/protobuf`},
	} {
		_, err := New(context.Background(), Config{Getenv: envOf(tt.env)})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %s", tt.env, err, tt.want)
		}
	}
	// Negative control: the same with http/protobuf starts.
	p, err := New(context.Background(), Config{Getenv: envOf(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})})
	if err != nil {
		t.Fatalf("http/protobuf: %v", err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

func TestNewExportsWithItsResource(t *testing.T) {
	exp := keep{tracetest.NewInMemoryExporter()}
	p, err := New(context.Background(), Config{
		Getenv:      envOf(map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test,service.version=9"}),
		ServiceName: "fairq-worker", Version: "1.2.3", InstanceID: "w-1", Exporter: exp,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider().Tracer("t").Start(context.Background(), "s")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported after Shutdown, want 1", len(spans))
	}
	got := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	for k, want := range map[string]string{
		"service.name": "fairq-worker", "service.version": "9", "service.instance.id": "w-1",
		"deployment.environment": "test", "telemetry.sdk.language": "go",
	} {
		if got[k] != want {
			t.Errorf("resource %s = %q, want %q", k, got[k], want)
		}
	}
}

// keep is an in-memory exporter whose spans outlive Shutdown, which
// tracetest's clears.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }
