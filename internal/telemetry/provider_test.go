package telemetry

import (
	"context"
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
	_, err := New(context.Background(), Config{Getenv: envOf(map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"})})
	if err == nil {
		t.Fatal("no error for OTEL_TRACES_EXPORTER=jaeger")
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
		got[string(kv.Key)] = kv.Value.Emit()
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
