package consumer

import (
	"cmp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// Message is a received message as a Handler sees it.
type Message struct {
	// ID is the message's identity (X-Aws-Sqsd-Msgid): the id the
	// gateway answered with, the same on every delivery whichever queue
	// the message moved through; for a message fairq did not enqueue,
	// the queue's message id.
	ID    string
	Queue string // the queue it was received from
	Body  string

	Tenant      string            // fairq-tenant; empty for a message without one
	Attributes  map[string]string // the user's attributes: the reserved ones are left out
	Traceparent string            // W3C trace context, when the sender gave one
	// Tracestate is the W3C tracestate the sender gave with Traceparent.
	Tracestate string
	// IdempotencyKey is the Idempotency-Key the message was enqueued
	// with, if any (X-Fairq-Idempotency-Key).
	IdempotencyKey string

	// EnqueuedAt is when the gateway accepted the message (fairq-meta),
	// or when it was sent to its queue if it carries no metadata.
	EnqueuedAt time.Time
	// FirstReceivedAt is when a worker first received the message, on
	// whichever queue (fairq-meta keeps it across moves).
	FirstReceivedAt time.Time
	// ReceiveCount counts deliveries across queue moves, this one
	// included: fairq-meta's attempts plus the queue's receive count.
	ReceiveCount int

	// Moved is set when a worker moved this copy to its queue (spilled
	// it, moved it to the backlog, parked it): the message arrived
	// before, as another copy.
	Moved bool
	// Backlog is set when the message was received from the backlog
	// queue: old work, which a Limiter may give less room than fresh
	// work of the same tenant.
	Backlog bool
	// Spare is how many of the worker's slots were free, besides the
	// message's own, when it asked the Limiter; Held is how long the
	// worker has held the message unstarted at the Limiter's word (Hold)
	// in this delivery. A Limiter holds a message only while other work
	// still finds slots, and for a moment in all.
	Spare int
	Held  time.Duration

	// Task is set when the message is the firing of a periodic task.
	Task *envelope.Task
}

// reserved reports whether an attribute is fairq's rather than the user's.
func reserved(name string) bool {
	switch name {
	case envelope.AttrTenant, envelope.AttrMeta, envelope.AttrTraceparent, envelope.AttrTask:
		return true
	}
	return false
}

// delivery is a received message with what the worker needs to move it.
type delivery struct {
	queue string
	raw   queue.Message
	meta  envelope.Meta // decoded fairq-meta, or one made from SentAt
	msg   Message
	task  bool
	// parkedFirst marks the first receive of a parked copy, which is no
	// delivery attempt: the copy is parked, or, if its tenant was resumed
	// meanwhile, sent on as an ordinary copy.
	parkedFirst bool
}

// newDelivery decodes a received message. A message without a valid
// fairq-meta (put on the queue by something other than the gateway) gets
// one with its sent time as enqueue time and no earlier attempts; an
// invalid fairq-task makes it an ordinary message.
func newDelivery(queueName string, m queue.Message) *delivery {
	d := &delivery{queue: queueName, raw: m}
	meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta])
	if err != nil || meta.EnqueuedAt == 0 {
		meta = envelope.Meta{EnqueuedAt: m.SentAt.UnixMilli(), Attempts: max(meta.Attempts, 0)}
	}
	meta.Attempts = max(meta.Attempts, 0)
	d.meta = meta
	d.msg = Message{
		ID:              cmp.Or(meta.ID, m.ID),
		Queue:           queueName,
		Body:            m.Body,
		Tenant:          m.Attributes[envelope.AttrTenant],
		Traceparent:     m.Attributes[envelope.AttrTraceparent],
		Tracestate:      meta.Tracestate,
		IdempotencyKey:  meta.IdempotencyKey,
		EnqueuedAt:      meta.Enqueued(),
		FirstReceivedAt: m.FirstReceivedAt,
		ReceiveCount:    meta.Attempts + m.ReceiveCount,
		Moved:           meta.FirstReceivedAt != 0, // set by every move
	}
	if meta.Parked {
		// A parked copy's first receive only parked it (package
		// parking): no delivery of the message.
		d.msg.ReceiveCount--
		d.parkedFirst = m.ReceiveCount <= 1
	}
	if first := meta.FirstReceived(); !first.IsZero() {
		d.msg.FirstReceivedAt = first
	}
	if v, ok := m.Attributes[envelope.AttrTask]; ok {
		if t, err := envelope.DecodeTask(v); err == nil {
			d.msg.Task = &t
			d.task = true
		}
	}
	n := 0
	for k := range m.Attributes {
		if !reserved(k) {
			n++
		}
	}
	if n > 0 {
		d.msg.Attributes = make(map[string]string, n)
		for k, v := range m.Attributes {
			if !reserved(k) {
				d.msg.Attributes[k] = v
			}
		}
	}
	return d
}

// attempts is the number of deliveries so far, this one included.
func (d *delivery) attempts() int { return d.msg.ReceiveCount }

// attemptsBefore returns the attempts before this delivery: a parked
// copy's first receive is already left out (newDelivery).
func (d *delivery) attemptsBefore() int {
	if d.parkedFirst {
		return d.attempts()
	}
	return d.attempts() - 1
}

// moved returns the attributes of a copy of the message for another queue
// (or the same queue again), whose fairq-meta carries attempts earlier
// deliveries, lastErr and notBefore (the zero time: none), marked parked
// if it is a parked copy; the other attributes are kept as they are.
func (d *delivery) moved(attempts int, lastErr string, notBefore time.Time, parked bool) map[string]string {
	attrs := make(map[string]string, len(d.raw.Attributes)+1)
	for k, v := range d.raw.Attributes {
		attrs[k] = v
	}
	if _, ok := attrs[envelope.AttrMeta]; !ok && len(attrs) >= queue.MaxAttributes {
		// A message from elsewhere that already has SQS's ten attributes
		// has no room for fairq-meta: it moves without, and its
		// attempts start again.
		return attrs
	}
	meta := d.meta
	// The copy is a new message to SQS: its id and first receive travel
	// in fairq-meta, so that the application sees the same ones.
	meta.ID = d.msg.ID
	if meta.FirstReceivedAt == 0 && !d.msg.FirstReceivedAt.IsZero() {
		meta.FirstReceivedAt = d.msg.FirstReceivedAt.UnixMilli()
	}
	meta.Attempts = max(attempts, 0)
	if lastErr != "" {
		meta.LastError = clip(lastErr, maxLastError)
	}
	meta.NotBefore = 0
	if !notBefore.IsZero() {
		meta.NotBefore = notBefore.UnixMilli()
	}
	meta.Parked = parked
	attrs[envelope.AttrMeta] = meta.Encode()
	return attrs
}

// maxLastError bounds the error text carried in fairq-meta, which counts
// against the message size.
const maxLastError = 512

// clip returns s with control characters other than tab replaced by
// spaces and cut to at most n bytes on a character boundary.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f || r == 0xfffe || r == 0xffff || r >= 0xd800 && r < 0xe000 {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
