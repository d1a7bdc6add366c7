// Package gateway is fairq's front door: the HTTP API of DESIGN.md §7 that
// authenticates a tenant's API key, checks its message, admits it under the
// tenant's rate and backlog limits, picks a queue of the tenant's shard and
// puts the message on it. openapi.json (served at /openapi.json) documents
// every route; a test holds it to the router.
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
//     ("fairq-…", "traceparent"), invalid UTF-8, characters SQS refuses
//     and delay_seconds outside 0–900 are 400 invalid_request naming the
//     problem; a message larger than MaxMessageSize as SQS counts it (body
//     plus every attribute's name, type and value, fairq's included) is
//     413 too_large.
//  3. Idempotency-Key (1–128 printable ASCII characters, per tenant): a
//     repeat within IdempotencyWindow (24 h) answers 200 with the first
//     message and the header Idempotent-Replayed: true, sending nothing,
//     whatever its body. The first request claims the key for the length
//     of its send; concurrent repeats wait for its answer, so they make
//     one message. A request that fails or is refused lets the key go, so
//     that its retry can send. Keys live in Redis when configured.
//  4. Admission takes a token from the tenant's ingest bucket
//     (ingest_rate, ingest_burst; Limiter). Between soft_backlog and
//     max_backlog the bucket's rate and size shrink linearly toward zero
//     (at a backlog halfway between, half the rate and half the burst); at
//     max_backlog the answer is 429 backlog_full, whose Retry-After
//     estimates how long the workers take to bring the backlog under the
//     maximum at process_rate. Over the rate the answer is 429
//     rate_limited with a Retry-After a client can trust: wait that long
//     and a token is there, unless another client of the tenant took it.
//  5. Picker chooses the live queue; the message joins the Batcher, which
//     coalesces concurrent messages bound for the same queue into
//     SendMessageBatch calls of up to ten (and BatchBytes): a message for
//     a queue with no call under way goes at once; while one is under
//     way, messages gather for the next, which goes when it returns, when
//     full, or BatchWindow (2 ms) after the first, whichever is first.
//  6. 202 {"id","tenant","queue","enqueued_at"} once SQS acknowledged the
//     message: id is SQS's MessageId, enqueued_at RFC 3339 UTC with ms.
//     The message is then counted on the tenant's backlog (Backlog.Add).
//
// The message carries fairq-tenant, fairq-meta (envelope.Meta: enqueue
// time, request id, idempotency key, the queue it was sent to) and, when
// the caller sent a valid W3C traceparent header, traceparent.
//
// POST /v1/messages/batch takes {"messages": [...]} of up to 100 messages,
// each with an optional idempotency_key in place of the header, and
// answers 200 {"results": [...]} in request order; the batch is admitted
// at once (the first messages get the tokens). GET /v1/tenant shows the
// caller's limits, backlog, and admitted and refused counts.
//
// # Cost of sends
//
// The Batcher groups sends the way a database groups commits. A message
// whose queue has no SendMessageBatch call under way is sent at once (its
// flush first yields the processor once, so that handlers already
// runnable join it); messages that arrive while a call is under way
// gather for the next call, which goes when that call returns, when
// full, or BatchWindow (2 ms) after its first message. So a lone message
// waits for nothing, and the calls per message fall as the load rises:
// with messages arriving at λ a second for one queue and calls taking L,
// a call carries about 1 + λ·min(L, BatchWindow) of them (at most ten),
// and many concurrent callers fill calls of ten. At 1,000 single
// messages/s spread over 8 queues (λ = 125/s per queue) most messages
// find their queue idle and go alone; the batch endpoint puts a
// request's messages for one queue in one call (Batcher.SubmitAll),
// which is how callers who care about cost send.
// The earlier design waited BatchWindow after every first message: at
// 1,000 single messages/s it made about 0.1–0.15 fewer calls per message
// (BENCHMARKS.md), cost every message up to 2 ms, and under load held a
// connection to little more than one request per window.
//
// # Faults
//
// A send that fails with a fault of the service (5xx, throttling, no
// answer within SendTimeout) is tried again with backoff, up to
// SendAttempts; a message SQS did not acknowledge is answered 503
// unavailable with Retry-After, never 202. The handler waits for the
// send's outcome even if its client leaves, so the picker, the backlog
// and the idempotency key always learn it.
//
// Redis: the rate limiter fails over on its own (throttle.FailoverLimiter).
// For the backlog counts and the idempotency keys, the gateway goes on
// without backpressure and with in-process keys while Redis is
// unreachable (fail open, the default), or answers 503 (FailClosed); it
// says so once in the log and in fairq_redis_degraded{component}, counts
// each answer given without Redis in fairq_redis_fallback_total, and
// leaves Redis alone for a second after each failure so that an outage
// does not cost every request a timeout.
//
// # Answers
//
// Errors are application/problem+json (RFC 9457) with a stable code and
// the request id; type is "urn:fairq:problem:<code>". problemOf is the one
// place where errors become statuses. Every response carries X-Request-Id:
// the caller's, when it is 1–128 printable ASCII characters without
// spaces, else a generated one. A panic in a handler is answered 500 and
// logged, never a crash. Admission answers carry RateLimit-Limit (the
// bucket size applied), RateLimit-Remaining (whole tokens left) and
// RateLimit-Reset (seconds until the bucket is full).
//
// # Admin
//
// /admin/v1 (tenants, keys, queue depths, dead-letter redrive) is mounted
// only when AdminTokenSHA256 is set. No token is 401; any other token, a
// tenant's key included, 403; the token's hash is compared in constant
// time. A new key is shown once; keys and tokens never reach logs,
// metrics or errors. Without a Redriver, redrive answers 503.
//
// # Life cycle
//
// New builds a Server (an http.Handler); Start before serving (it starts
// the batcher, the backend probe and, with Redis, the flush of tenant
// counts). The backlog counts are a component of their own
// (backlog.Tracker, which reconciles them), started before the gateway
// and stopped after it. At shutdown, first
// http.Server.Shutdown: it stops accepting and waits for the handlers,
// which wait for their sends. Then Stop: it flushes the batches still
// pending, waits for their sends and stops the loops. Enqueues after Stop
// are answered 503.
package gateway
