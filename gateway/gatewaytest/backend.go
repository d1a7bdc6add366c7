package gatewaytest

import (
	"context"
	"sync"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// Flaky is a queue.Backend that passes calls to another and fails Send or
// Depth on demand, the way SQS fails under faults.
type Flaky struct {
	queue.Backend

	mu        sync.Mutex
	sendFails int   // Send calls still to fail; < 0 fails all
	sendErr   error // what they fail with; nil stalls them until their ctx ends
	depthErr  error
	sends     int // Send calls made
	messages  int // entries passed on to the backend
	firstMeta envelope.Meta
}

var _ queue.Backend = (*Flaky)(nil)

// NewFlaky returns a Flaky over b that fails nothing yet.
func NewFlaky(b queue.Backend) *Flaky { return &Flaky{Backend: b} }

// FailSends makes the next n Send calls fail with err without reaching the
// backend; n < 0 fails every call until FailSends(0, nil). A nil err makes
// them stall until their context ends, as a request to an unresponsive
// service does, and fail with the context's error.
func (f *Flaky) FailSends(n int, err error) {
	f.mu.Lock()
	f.sendFails, f.sendErr = n, err
	f.mu.Unlock()
}

// FailDepth makes Depth fail with err; nil heals it.
func (f *Flaky) FailDepth(err error) {
	f.mu.Lock()
	f.depthErr = err
	f.mu.Unlock()
}

// Sends returns the number of Send calls made, failed ones included, and
// the number of entries that reached the backend.
func (f *Flaky) Sends() (calls, entries int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sends, f.messages
}

// Send fails if told to, else sends.
func (f *Flaky) Send(ctx context.Context, q string, entries []queue.Entry) ([]queue.SendResult, error) {
	f.mu.Lock()
	f.sends++
	if f.sends == 1 && len(entries) > 0 {
		f.firstMeta, _ = envelope.Decode(entries[0].Attributes[envelope.AttrMeta])
	}
	if f.sendFails != 0 {
		if f.sendFails > 0 {
			f.sendFails--
		}
		err := f.sendErr
		f.mu.Unlock()
		if err == nil {
			<-ctx.Done()
			err = ctx.Err()
		}
		return nil, err
	}
	f.messages += len(entries)
	f.mu.Unlock()
	return f.Backend.Send(ctx, q, entries)
}

// FirstEntryMeta returns the fairq-meta of the first entry of the first
// Send call, failed or not.
func (f *Flaky) FirstEntryMeta() envelope.Meta {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.firstMeta
}

// Depth fails if told to, else asks the backend.
func (f *Flaky) Depth(ctx context.Context, q string) (queue.Depth, error) {
	f.mu.Lock()
	err := f.depthErr
	f.mu.Unlock()
	if err != nil {
		return queue.Depth{}, err
	}
	return f.Backend.Depth(ctx, q)
}
