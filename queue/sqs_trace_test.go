package queue_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

func spanAttrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestSQSTrace: a call made under a span is one client span, child of it,
// with the SDK's attributes (those of its inner spans included, the
// attempt number among them); a call made under none makes no span.
func TestSQSTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	b, _, prefix := sqsSetup(t)
	b.Trace(tp)
	q := prefix + "-traced"
	if _, err := b.Create(t.Context(), queue.Spec{Name: q}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Receive(t.Context(), q, queue.ReceiveOptions{Max: 1}); err != nil {
		t.Fatal(err)
	}
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Fatalf("calls under no span made spans: %v", spans)
	}

	ctx, parent := tp.Tracer("test").Start(t.Context(), "send")
	if _, err := b.Send(ctx, q, []queue.Entry{{ID: "0", Body: "x"}}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var send *tracetest.SpanStub
	spans := exp.GetSpans()
	for i, s := range spans {
		if s.Name == "SQS.SendMessageBatch" {
			send = &spans[i]
		}
	}
	if send == nil || len(spans) != 2 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("spans %v, want the parent and SQS.SendMessageBatch only (the queue's URL was looked up by Create)", names)
	}
	if send.SpanKind != trace.SpanKindClient || send.Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("SendMessageBatch span kind %v parent %v, want client, child of %v", send.SpanKind, send.Parent.SpanID(), parent.SpanContext().SpanID())
	}
	a := spanAttrs(*send)
	if a["rpc.system"].AsString() != "aws-api" || a["rpc.method"].AsString() != "SendMessageBatch" || a["http.status_code"].AsInt64() != 200 || a["operation.attempt"].AsInt64() != 1 {
		t.Errorf("attributes %v: want rpc.system aws-api, rpc.method SendMessageBatch, http.status_code 200, operation.attempt 1", a)
	}
}

// TestSQSTraceRetry: a call retried is still one span, its attempts
// counted on it.
func TestSQSTraceRetry(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b, err := queue.NewSQS(t.Context(), queue.SQSConfig{
		Region:      "us-east-1",
		Endpoint:    failFirst(t),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  prometheus.NewRegistry(),
		HTTPClient:  noKeepAlive(),
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Trace(tp)
	ctx, parent := tp.Tracer("test").Start(t.Context(), "depth")
	_, _ = b.Depth(ctx, testenv.Prefix(t)+"-missing")
	parent.End()
	var calls []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			calls = append(calls, s)
		}
	}
	if len(calls) != 1 || calls[0].Name != "SQS.GetQueueUrl" {
		t.Fatalf("client spans %v, want one SQS.GetQueueUrl", calls)
	}
	a := spanAttrs(calls[0])
	if a["operation.attempt"].AsInt64() != 2 || calls[0].Status.Code.String() != "Error" || a["api.error_code"].AsString() == "" {
		t.Errorf("attributes %v status %v: want operation.attempt 2, an error and its code", a, calls[0].Status)
	}
}
