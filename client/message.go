package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Message is one message to enqueue.
type Message struct {
	// Body is the message. A string (or a []byte) is the body as it is;
	// a json.RawMessage is sent as that JSON; any other value is encoded
	// with encoding/json, and the worker delivers its JSON text. It must
	// not be empty.
	Body any
	// Attributes are up to 7 string attributes, delivered as
	// X-Aws-Sqsd-Attr-<name> headers.
	Attributes map[string]string
	// DelaySeconds delays the first delivery, 0–900.
	DelaySeconds int
	// IdempotencyKey, when set, makes a repeat of the message within the
	// gateway's idempotency window (24 h by default) answer with the first
	// message instead of enqueuing another; it also makes the call safe to
	// retry after a lost answer. 1–128 printable ASCII characters, scoped
	// to the tenant. See WithIdempotencyKeys.
	IdempotencyKey string
}

// wireMessage is a Message as the API takes it.
type wireMessage struct {
	Body           any               `json:"body"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	DelaySeconds   int               `json:"delay_seconds,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
}

func (m Message) wire(key string) wireMessage {
	body := m.Body
	if b, ok := body.([]byte); ok {
		body = string(b) // not base64, as encoding/json would make it
	}
	return wireMessage{Body: body, Attributes: m.Attributes, DelaySeconds: m.DelaySeconds, IdempotencyKey: key}
}

// key returns the message's idempotency key, or a new one when the client
// generates them.
func (c *Client) key(m Message) string {
	if m.IdempotencyKey == "" && c.genKeys {
		return newKey()
	}
	return m.IdempotencyKey
}

// Accepted is a message on a queue.
type Accepted struct {
	ID         string    // the message's id for its whole life (X-Aws-Sqsd-Msgid at the worker)
	Tenant     string    // the tenant of the API key
	Queue      string    // the live queue it was sent to
	EnqueuedAt time.Time // when the gateway accepted it
	// Replayed is true when the answer is the first message of an
	// earlier request with the same idempotency key: nothing was sent.
	Replayed bool
	// RequestID is the id of the request (X-Request-Id).
	RequestID string
}

type acceptedJSON struct {
	ID         string    `json:"id"`
	Tenant     string    `json:"tenant"`
	Queue      string    `json:"queue"`
	EnqueuedAt time.Time `json:"enqueued_at"`
}

func (a acceptedJSON) accepted(replayed bool, requestID string) Accepted {
	return Accepted{ID: a.ID, Tenant: a.Tenant, Queue: a.Queue, EnqueuedAt: a.EnqueuedAt, Replayed: replayed, RequestID: requestID}
}

// Enqueue puts one message on a queue of the tenant's shard (POST
// /v1/messages) and returns it once SQS has acknowledged it. A refusal is
// an *Error (see the sentinels); the package documentation says which
// failures are retried.
func (c *Client) Enqueue(ctx context.Context, m Message) (Accepted, error) {
	key := c.key(m)
	body, err := json.Marshal(m.wire(""))
	if err != nil {
		return Accepted{}, fmt.Errorf("fairq: encoding the message: %w", err)
	}
	var acc Accepted
	err = c.retry(ctx, func(ctx context.Context) (bool, time.Duration, error) {
		a, err := c.send(ctx, http.MethodPost, "/v1/messages", body, key)
		if err != nil {
			return retryableFailure(ctx, err, key != ""), 0, err
		}
		if a.res.StatusCode != http.StatusAccepted && a.res.StatusCode != http.StatusOK {
			e := errorOf(a.res, a.body)
			return retryableAnswer(e), e.RetryAfter, e
		}
		var aj acceptedJSON
		if err := json.Unmarshal(a.body, &aj); err != nil {
			return false, 0, fmt.Errorf("fairq: decoding the answer (%d): %w", a.res.StatusCode, err)
		}
		acc = aj.accepted(a.res.Header.Get("Idempotent-Replayed") == "true", a.res.Header.Get("X-Request-Id"))
		return false, 0, nil
	})
	return acc, err
}

// Result is the outcome of one message of a batch: Accepted, or Err (an
// *Error) when the message was refused.
type Result struct {
	Accepted
	Err error
}

type batchAnswer struct {
	Results []struct {
		acceptedJSON
		Status     int    `json:"status"`
		Code       Code   `json:"code"`
		Detail     string `json:"detail"`
		RetryAfter int64  `json:"retry_after"`
	} `json:"results"`
}

// EnqueueBatch puts up to 100 messages on the queues in one request (POST
// /v1/messages/batch) and returns one Result per message, in order. The
// error is for the batch as a whole (a bad key, a malformed batch, no
// answer); each message's refusal is in its Result. Messages refused with
// 429 or 503 are sent again, alone, while attempts remain.
func (c *Client) EnqueueBatch(ctx context.Context, ms []Message) ([]Result, error) {
	entries := make([]wireMessage, len(ms))
	replaySafe := true
	for i, m := range ms {
		entries[i] = m.wire(c.key(m))
		replaySafe = replaySafe && entries[i].IdempotencyKey != ""
	}
	results := make([]Result, len(ms))
	answered := false               // a round was answered: results holds its outcomes
	pending := make([]int, len(ms)) // indexes of the messages still to send
	for i := range pending {
		pending[i] = i
	}
	err := c.retry(ctx, func(ctx context.Context) (bool, time.Duration, error) {
		batch := struct {
			Messages []wireMessage `json:"messages"`
		}{Messages: make([]wireMessage, len(pending))}
		for j, i := range pending {
			batch.Messages[j] = entries[i]
		}
		body, err := json.Marshal(batch)
		if err != nil {
			return false, 0, fmt.Errorf("fairq: encoding the batch: %w", err)
		}
		a, err := c.send(ctx, http.MethodPost, "/v1/messages/batch", body, "")
		if err != nil {
			return retryableFailure(ctx, err, replaySafe), 0, err
		}
		if a.res.StatusCode != http.StatusOK {
			e := errorOf(a.res, a.body)
			return retryableAnswer(e), e.RetryAfter, e
		}
		var ba batchAnswer
		if err := json.Unmarshal(a.body, &ba); err != nil {
			return false, 0, fmt.Errorf("fairq: decoding the batch answer: %w", err)
		}
		if len(ba.Results) != len(pending) {
			return false, 0, fmt.Errorf("fairq: %d results for a batch of %d", len(ba.Results), len(pending))
		}
		answered = true
		requestID := a.res.Header.Get("X-Request-Id")
		var again []int
		var wait time.Duration
		for j, r := range ba.Results {
			i := pending[j]
			if r.Status == http.StatusAccepted || r.Status == http.StatusOK {
				results[i] = Result{Accepted: r.accepted(r.Status == http.StatusOK, requestID)}
				continue
			}
			e := &Error{Status: r.Status, Code: r.Code, Detail: r.Detail, RequestID: requestID, RetryAfter: time.Duration(r.RetryAfter) * time.Second}
			if e.Code == "" {
				e.Code = codeOfStatus[e.Status]
			}
			results[i] = Result{Err: e}
			if retryableAnswer(e) {
				again = append(again, i)
				wait = max(wait, e.RetryAfter)
			}
		}
		pending = again
		return len(again) > 0, wait, nil
	})
	switch {
	case err == nil:
		return results, nil
	case !answered:
		return nil, err
	}
	// A later round failed as a whole: the earlier rounds' results stand,
	// and the messages still pending carry its error.
	for _, i := range pending {
		results[i].Err = err
	}
	return results, nil
}
