// Package gateway is fairq's front door: the HTTP API that authenticates a
// tenant's API key, checks its messages, admits them under the tenant's
// rate and backlog limits, picks a queue of the tenant's shard and puts
// them on it, answering 202 only once SQS acknowledged them. openapi.json
// (served at /openapi.json) documents every route; a test holds it to the
// router. docs/architecture.md places it in the flow; the README is the
// contract a client relies on.
//
// One pipeline serves both enqueue endpoints: a single message is the
// one-entry case of enqueue (enqueue.go), which takes entries through
// prepare (attributes, size, the message id), idempotency (package
// idempotency, idempotency.go), admission (admit: the ingest bucket,
// shrinking with the backlog), submit (the shard pick, then the batcher of
// internal/batch)
// and await. Before any of it, precheck and the body budget (body.go)
// refuse what would be refused anyway, without reading the body.
//
// The batcher groups the sends to each queue: a message waits up to
// SendWindow (gateway.send_window) for others to the same queue, but only
// while the rate of that queue makes others likely within it; a full batch
// and a message to a quiet queue go at once. flush (sender.go) states the
// one retry policy: the backend retries a call, flush retries entries a
// call reported failed, SendTimeout bounds both. backendHealth
// (backend_health.go) turns failures into a fast 503 and /readyz's answer.
//
// Errors are application/problem+json (RFC 9457) with a stable code;
// problemOf (problem.go) is the one place where errors become statuses.
// Keys and tokens never reach logs, metrics or errors. /admin/v1 is mounted
// only when AdminTokenSHA256 is set.
//
// Life cycle: New, then Start before serving; at shutdown,
// http.Server.Shutdown first (handlers wait for their sends), then Stop,
// which flushes the pending batches and stops the background loops.
package gateway
