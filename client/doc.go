// Package client is a Go client of fairq's HTTP API: it enqueues messages
// for the tenant of an API key (one, or a batch of up to 100) and reads
// that tenant's limits and counts.
//
//	c, err := client.New("https://fairq.example.com", os.Getenv("FAIRQ_API_KEY"),
//		client.WithIdempotencyKeys())
//	if err != nil { ... }
//	acc, err := c.Enqueue(ctx, client.Message{Body: map[string]any{"order": 42}})
//	switch {
//	case errors.Is(err, client.ErrRateLimited), errors.Is(err, client.ErrBacklogFull):
//		// still refused after the retries: shed or queue the work locally
//	case err != nil:
//		var e *client.Error
//		if errors.As(err, &e) { log.Print(e.Code, e.Detail, e.RequestID) }
//	}
//
// # Errors
//
// An answer other than success is an *Error carrying the HTTP status, the
// API's stable problem code, its detail, the request id to quote in a
// support request and, for 429 and 503, how long the server asked to wait.
// Each code has a sentinel, so that errors.Is(err, client.ErrRateLimited)
// tells a caller what happened without reading the code.
//
// # Retries
//
// A call is retried (WithRetries sets how often and how long to wait) only
// where retrying cannot enqueue a message twice:
//
//   - 429 (rate_limited, backlog_full): the message was refused, not
//     enqueued. The wait is the answer's Retry-After, which the gateway
//     computes so that a client waiting that long is admitted, plus a
//     little jitter so that refused clients do not return together.
//   - 503 (unavailable): the gateway could not reach a service it depends
//     on. It answers 202 only once SQS has acknowledged the message, so a
//     503 means the message was not acknowledged; a send whose outcome SQS
//     did not report is the one case where it might still be stored, which
//     an Idempotency-Key covers.
//   - 409 idempotency_key_in_progress: the first request with the same key
//     is still being answered; the retry gets its answer.
//   - a connection that failed before the request was sent (dial errors).
//
// Without a Retry-After the wait is an exponential backoff with full
// jitter between the base and the cap of WithRetries. No wait runs past the
// context's deadline: when the next attempt could not start before it, the
// call returns the last error at once.
//
// A connection that fails after the request was written (reset, timeout
// waiting for the answer) leaves it unknown whether the gateway received
// the message. A POST /v1/messages without an Idempotency-Key is then NOT
// retried, since a second attempt may enqueue it twice; give the Message
// an IdempotencyKey, or create the client WithIdempotencyKeys so that each
// Enqueue generates one, and such failures are retried too: every attempt
// of one call carries the same key, and the gateway answers a repeat with
// the first message (Accepted.Replayed). A batch is retried after such a
// failure only when every message in it has a key. GET /v1/tenant is always
// safe to retry.
//
// In a batch answer (200), the messages refused with 429 or 503 are sent
// again, alone, after the largest Retry-After among them; the results keep
// the request's order.
package client
