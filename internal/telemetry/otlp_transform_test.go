package telemetry

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/testing/protocmp"
)

var (
	tid     = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid     = trace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	psid    = trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	lsid    = trace.SpanID{8, 7, 6, 5, 4, 3, 2, 1}
	t0      = time.Unix(1_700_000_000, 123_456_789)
	testRes = resource.NewWithAttributes("https://opentelemetry.io/schemas/1.43.0", attribute.String("service.name", "fairq-gateway"))
)

func sc(t *testing.T, id trace.SpanID, state string, remote bool) trace.SpanContext {
	t.Helper()
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: id, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: remote})
}

// TestSpanProto: every field of a span, every kind of attribute value, and
// the status codes, which OTLP numbers differently from the API.
func TestSpanProto(t *testing.T) {
	stub := tracetest.SpanStub{
		Name:        "POST /v1/tenants/{tenant}/jobs",
		SpanContext: sc(t, sid, "congo=t61rcWkgMzE", false),
		Parent:      sc(t, psid, "", true),
		SpanKind:    trace.SpanKindServer,
		StartTime:   t0,
		EndTime:     t0.Add(1500 * time.Microsecond),
		Attributes: []attribute.KeyValue{
			attribute.Bool("b", true), attribute.Int64("i", -7), attribute.Float64("f", 0.5), attribute.String("s", "x"),
			attribute.ByteSlice("by", []byte{0, 1}), attribute.BoolSlice("bs", []bool{true, false}),
			attribute.Int64Slice("is", []int64{1, 2}), attribute.Float64Slice("fs", []float64{1.5}),
			attribute.StringSlice("ss", []string{"a", "b"}),
			attribute.Slice("sl", attribute.IntValue(1), attribute.StringValue("two")),
			attribute.Map("m", attribute.String("k", "v")),
		},
		Events: []sdktrace.Event{{Name: "spilled", Time: t0.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("reason", "rate")}, DroppedAttributeCount: 1}},
		Links:  []sdktrace.Link{{SpanContext: sc(t, lsid, "", true), Attributes: []attribute.KeyValue{attribute.String("l", "1")}, DroppedAttributeCount: 2}},
		Status: sdktrace.Status{Code: codes.Error, Description: "backend unavailable"},

		DroppedAttributes: 3, DroppedEvents: 4, DroppedLinks: 5,
		Resource:             testRes,
		InstrumentationScope: instrumentation.Scope{Name: "github.com/fairq/fairq/gateway", Version: "1.0"},
	}
	got := spanProto(stub.Snapshot())
	str := func(s string) *commonpb.AnyValue { return stringValue(s) }
	want := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], ParentSpanId: psid[:], TraceState: "congo=t61rcWkgMzE",
		Flags: 0x01 | 0x100 | 0x200, Name: "POST /v1/tenants/{tenant}/jobs", Kind: tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: 1_700_000_000_123_456_789, EndTimeUnixNano: 1_700_000_000_124_956_789,
		Attributes: []*commonpb.KeyValue{
			{Key: "b", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}},
			{Key: "i", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: -7}}},
			{Key: "f", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.5}}},
			{Key: "s", Value: str("x")},
			{Key: "by", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1}}}},
			{Key: "bs", Value: array(boolValue(true), boolValue(false))},
			{Key: "is", Value: array(intValue(1), intValue(2))},
			{Key: "fs", Value: array(floatValue(1.5))},
			{Key: "ss", Value: array(str("a"), str("b"))},
			{Key: "sl", Value: array(intValue(1), str("two"))},
			{Key: "m", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{{Key: "k", Value: str("v")}}}}}},
		},
		DroppedAttributesCount: 3, DroppedEventsCount: 4, DroppedLinksCount: 5,
		Events: []*tracepb.Span_Event{{
			TimeUnixNano: 1_700_000_000_124_456_789, Name: "spilled",
			Attributes: []*commonpb.KeyValue{{Key: "reason", Value: str("rate")}}, DroppedAttributesCount: 1,
		}},
		Links: []*tracepb.Span_Link{{
			TraceId: tid[:], SpanId: lsid[:], Flags: 0x01 | 0x100 | 0x200,
			Attributes: []*commonpb.KeyValue{{Key: "l", Value: str("1")}}, DroppedAttributesCount: 2,
		}},
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "backend unavailable"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("span (-want +got):\n%s", diff)
	}

	// A root span has no parent id, and a local parent leaves bit 9 clear.
	root := tracetest.SpanStub{SpanContext: sc(t, sid, "", false), StartTime: t0, Resource: testRes}
	if p := spanProto(root.Snapshot()); p.ParentSpanId != nil || p.Flags != 0x101 || p.EndTimeUnixNano != 0 || p.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
		t.Errorf("root span: parent %x flags %#x end %d kind %v; want none, 0x101, 0, internal", p.ParentSpanId, p.Flags, p.EndTimeUnixNano, p.Kind)
	}
}

func array(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

func TestStatusProto(t *testing.T) {
	for _, tt := range []struct {
		in   sdktrace.Status
		want *tracepb.Status
	}{
		{sdktrace.Status{}, &tracepb.Status{}},
		{sdktrace.Status{Code: codes.Ok, Description: "ignored"}, &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}},
		{sdktrace.Status{Code: codes.Error, Description: "boom"}, &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"}},
	} {
		if diff := cmp.Diff(tt.want, statusProto(tt.in), protocmp.Transform()); diff != "" {
			t.Errorf("status %v (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestResourceSpans: spans are grouped by resource, then by scope, in the
// order they come.
func TestResourceSpans(t *testing.T) {
	other := resource.NewSchemaless(attribute.String("service.name", "fairq-worker"))
	gw := instrumentation.Scope{Name: "gateway"}
	sqs := instrumentation.Scope{Name: "queue", Attributes: attribute.NewSet(attribute.String("a", "b"))}
	span := func(name string, r *resource.Resource, s instrumentation.Scope) sdktrace.ReadOnlySpan {
		return tracetest.SpanStub{Name: name, SpanContext: sc(t, sid, "", false), Resource: r, InstrumentationScope: s}.Snapshot()
	}
	got := resourceSpans([]sdktrace.ReadOnlySpan{
		span("a", testRes, gw), span("b", other, gw), span("c", testRes, sqs), span("d", testRes, gw),
	})
	type group struct {
		Service string
		Schema  string
		Scopes  map[string][]string
	}
	var summary []group
	for _, rs := range got {
		g := group{Service: rs.GetResource().GetAttributes()[0].GetValue().GetStringValue(), Schema: rs.GetSchemaUrl(), Scopes: map[string][]string{}}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				g.Scopes[ss.GetScope().GetName()] = append(g.Scopes[ss.GetScope().GetName()], s.GetName())
			}
		}
		summary = append(summary, g)
	}
	want := []group{
		{Service: "fairq-gateway", Schema: "https://opentelemetry.io/schemas/1.43.0", Scopes: map[string][]string{"gateway": {"a", "d"}, "queue": {"c"}}},
		{Service: "fairq-worker", Scopes: map[string][]string{"gateway": {"b"}}},
	}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if attrs := got[0].GetScopeSpans()[1].GetScope().GetAttributes(); len(attrs) != 1 || attrs[0].GetKey() != "a" {
		t.Errorf("scope attributes %v, want a=b", attrs)
	}
	if diff := cmp.Diff(&resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: stringValue("fairq-worker")}}}, got[1].GetResource(), protocmp.Transform()); diff != "" {
		t.Errorf("resource (-want +got):\n%s", diff)
	}
}
