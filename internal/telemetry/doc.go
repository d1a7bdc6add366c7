// Package telemetry is fairq's OpenTelemetry tracing: the process's tracer
// provider, configured only by the standard OTEL_* variables and off when
// they ask for no exporter (New), and the conventions the gateway and the
// worker share to carry a message's trace context through the queues
// (Traceparent, SpanContextOf, ExtractHTTP, InjectHTTP and the attribute
// keys).
//
// The gateway makes a server span per request and a producer span per
// message, whose context travels in fairq-meta (package envelope) through
// every move; the worker makes a consumer span per delivery attempt, a
// child of that producer span and linked to it, and hands its context to
// the application in the push's traceparent header. Both decide sampling
// before they start a span (HeadSampler), so that a request or a delivery
// the sampler leaves out costs next to nothing. The README's "Tracing"
// section lists the spans and their attributes.
package telemetry
