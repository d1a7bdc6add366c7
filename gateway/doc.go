// Package gateway is fairq's front door: the HTTP API of DESIGN.md §7 that
// authenticates a tenant's API key, checks its message, admits it under the
// tenant's rate and backlog limits, picks a queue of the tenant's shard and
// puts the message on it.
//
// # A message's way in
//
// POST /v1/messages with Authorization: Bearer <key>:
//
//  1. The key names the tenant (tenant.Registry); the fairq-tenant
//     attribute comes from it and from nothing the request says.
//  2. Content-Type must be application/json; the raw body is capped at
//     three times MaxMessageSize plus 64 KiB (JSON escapes can triple a
//     text), then decoded strictly: unknown fields, wrong types, more
//     than seven attributes, attribute names SQS refuses or fairq reserves
//     ("fairq-…", "traceparent"), invalid UTF-8 and characters SQS refuses
//     are 400 invalid_request naming the problem; a message larger than
//     MaxMessageSize as SQS counts it (body plus every attribute's name,
//     type and value, fairq's included) is 413 too_large.
//  3. Admission takes a token from the tenant's ingest bucket (Limiter):
//     429 rate_limited with a Retry-After that a client can trust
//     otherwise.
//  4. Picker chooses the live queue; the message joins the Batcher, which
//     coalesces concurrent messages bound for the same queue into
//     SendMessageBatch calls of up to ten, flushed when full or
//     BatchWindow (2 ms) after the first. Faults of SQS are retried with
//     backoff; a message SQS did not acknowledge is answered 503, never
//     202.
//  5. 202 {"id","tenant","queue","enqueued_at"}: id is SQS's MessageId.
//
// The message carries fairq-tenant, fairq-meta (envelope.Meta: enqueue
// time, request id, idempotency key, the queue it was sent to) and, when
// the caller sent a valid W3C traceparent header, traceparent.
//
// # Answers
//
// Errors are application/problem+json (RFC 9457) with a stable code and
// the request id; type is "urn:fairq:problem:<code>". problemOf is the one
// place where errors become statuses. Every response carries X-Request-Id:
// the caller's, when it is 1–128 printable ASCII characters without
// spaces, else a generated one. A panic in a handler is answered 500 and
// logged, never a crash. Admission answers carry RateLimit-Limit (the
// bucket size), RateLimit-Remaining (whole tokens left) and RateLimit-Reset
// (seconds until the bucket is full).
//
// # Life cycle
//
// New builds a Server (an http.Handler); Start before serving; at shutdown
// first http.Server.Shutdown (stops accepting, waits for handlers, which
// wait for their sends), then Stop, which flushes the batches still
// pending. Enqueues after Stop are answered 503.
package gateway
