package gateway

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/clock"
	"github.com/fairq/fairq/queue"
)

// sendItem is one message waiting for a batch.
type sendItem struct {
	tenant string
	meta   envelope.Meta
	size   int
	body   string
	attrs  map[string]string
	delay  time.Duration
	span   trace.Span // the message's producer span; nil when the gateway does not trace
}

// sendResult is the fate of one sendItem.
type sendResult struct {
	err error
	// uncertain marks an err after which the message may have reached
	// the queue all the same: the call timed out or broke off, and only
	// the queue knows whether it stored the message.
	uncertain bool
}

// preferringPicker is a Picker that can take, among the queues of a
// tenant's shard about as shallow as the shallowest, one that prefer
// accepts (sharding.Tracker).
type preferringPicker interface {
	PickPreferring(tenant string, prefer func(q int) bool) int
}

// preferWaiting makes the picks prefer the queues where a batch is waiting
// for its window, when there is a window and the Picker can: a message
// that joins a waiting batch costs no call of its own, where one that
// starts a batch on another queue of its shard costs one and waits.
func (s *Server) preferWaiting() {
	pp, ok := s.cfg.Picker.(preferringPicker)
	if !ok || s.cfg.SendWindow == 0 {
		return
	}
	s.preferring = pp
	s.waiting = func(q int) bool {
		return q >= 0 && q < len(s.cfg.Names.Live) && s.batcher.Waiting(s.cfg.Names.Live[q])
	}
}

// pickQueue returns the index in Names.Live of the queue for a message of
// the tenant.
func (s *Server) pickQueue(tenant string) int {
	if s.preferring != nil {
		return s.preferring.PickPreferring(tenant, s.waiting)
	}
	return s.cfg.Picker.Pick(tenant)
}

// Backoff between the attempts of entries a batch call reported failed:
// full jitter over an exponential ceiling.
const (
	sendBackoffBase = 50 * time.Millisecond
	sendBackoffCap  = time.Second
)

// flush sends one batch to a queue: the send batcher's Flush. One retry policy
// holds, stated here once: a call is retried by the backend (the AWS SDK's
// standard retryer for SQS: up to 3 attempts with backoff), never again
// here; entries that a call answered as failed by a fault of the service
// are sent again here, with backoff; and every attempt of the batch
// together is bounded by SendTimeout, after which what is not sent is
// answered 503. A message that was not acknowledged is reported failed,
// so that no client gets a 202 for it; one whose call timed out or broke
// off is reported uncertain, as it may be on the queue all the same.
// Accepted messages are counted on their tenant's backlog here, whether
// or not their caller is still waiting.
func (s *Server) flush(ctx context.Context, name string, items []sendItem) ([]sendResult, error) {
	s.m.batchSize.Observe(float64(len(items)))
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	defer cancel()
	results := make([]sendResult, len(items))
	var sent [queue.MaxBatch]bool
	var indices [queue.MaxBatch]int
	todo := indices[:len(items)] // indices still to send
	for i := range todo {
		todo[i] = i
	}
	entries := make([]queue.Entry, 0, len(items))
	sendCtx := sendContext(ctx, items) // the SQS call's span joins a message's trace
	for attempt := 1; ; attempt++ {
		entries = entries[:0]
		for _, i := range todo {
			it := &items[i]
			entries = append(entries, queue.Entry{ID: queue.EntryID(i), Body: it.body, Attributes: it.attrs, Delay: it.delay})
		}
		res, err := s.cfg.Backend.Send(sendCtx, name, entries)
		if err != nil {
			s.m.sends.WithLabelValues("error").Inc()
			if retryable(err) {
				s.backend.failed()
			}
			for _, i := range todo {
				results[i] = sendResult{err: sendError(err), uncertain: !refused(err)}
			}
			break
		}
		s.m.sends.WithLabelValues("ok").Inc()
		s.backend.ok()
		var again []int
		var lastErr error
		for _, r := range res {
			i, perr := strconv.Atoi(r.ID)
			if perr != nil || i < 0 || i >= len(items) {
				continue // not an id of ours; its entry stays unanswered below
			}
			switch {
			case r.Err == nil:
				sent[i] = true
			case retryable(r.Err):
				lastErr = r.Err
				again = append(again, i)
			default:
				results[i].err = sendError(r.Err)
			}
		}
		for _, i := range todo {
			if !sent[i] && results[i].err == nil && !slices.Contains(again, i) {
				// Answered for nothing: whether it was stored is unknown.
				results[i] = sendResult{err: sendError(fmt.Errorf("queue %q gave no result for entry %d", name, i)), uncertain: true}
			}
		}
		if len(again) == 0 {
			break
		}
		if clock.Sleep(ctx, backoff(attempt)) != nil {
			for _, i := range again {
				results[i].err = sendError(fmt.Errorf("within the send timeout of %v, after %d attempts: %w", s.cfg.SendTimeout, attempt, lastErr))
			}
			break
		}
		s.m.retries.Inc()
		todo = again
	}
	s.account(items, results)
	return results, nil
}

// account adds the accepted messages to their tenants' backlogs and counts
// the failures.
func (s *Server) account(items []sendItem, results []sendResult) {
	var tenants [queue.MaxBatch]string
	var counts [queue.MaxBatch]int64
	n := 0
	for i, r := range results {
		if r.err != nil {
			_, e := problemOf(r.err)
			s.m.sendErrors.WithLabelValues(string(e.Code)).Inc()
			continue
		}
		j := 0
		for j < n && tenants[j] != items[i].tenant {
			j++
		}
		if j == n {
			tenants[n] = items[i].tenant
			n++
		}
		counts[j]++
	}
	// The counts are estimates that reconciliation corrects: the Backlog
	// takes them without waiting (see backlog.Tracker), so that the
	// callers of this batch are not held up by Redis.
	for j := range n {
		s.cfg.Backlog.Add(tenants[j], counts[j])
	}
}

// retryable reports whether a send error is a fault of the queue service
// or of the network, worth another attempt.
func retryable(err error) bool { return !refused(err) && !errors.Is(err, context.Canceled) }

// refused reports whether a send error says the queue service refused the
// call as it was, storing nothing.
func refused(err error) bool {
	return errors.Is(err, queue.ErrInvalidEntry) || errors.Is(err, queue.ErrTooLarge) ||
		errors.Is(err, queue.ErrTooManyEntries) || errors.Is(err, queue.ErrEmptyBatch) ||
		errors.Is(err, queue.ErrQueueNotFound)
}

// sendError is the error a caller gets for a message that was not sent:
// the service's refusal of an invalid message as is, anything else as
// unavailable (503, Retry-After).
func sendError(err error) error {
	if errors.Is(err, queue.ErrInvalidEntry) || errors.Is(err, queue.ErrTooLarge) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeUnavailable, Detail: "the queue service did not answer within the send timeout; retry with the same Idempotency-Key", RetryAfter: time.Second, Err: err}
	}
	return &Error{Code: CodeUnavailable, Detail: "the queue service did not take the message; retry", RetryAfter: time.Second, Err: err}
}

// backoff returns the wait before attempt+1.
func backoff(attempt int) time.Duration {
	ceil := min(sendBackoffBase<<(attempt-1), sendBackoffCap)
	return time.Duration(rand.Int64N(int64(ceil))) + time.Millisecond
}
