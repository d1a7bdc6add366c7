package queue

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Defaults Memory applies to the zero fields of a Spec, as SQS does.
const (
	VisibilityTimeoutDefault = 30 * time.Second
	RetentionDefault         = 4 * 24 * time.Hour
)

// Limits of queue attributes that SQS enforces and Memory checks in Create.
const (
	MinMessageSize       = 1 << 10
	MinRetention         = 60 * time.Second
	MaxRetention         = 14 * 24 * time.Hour
	MaxReceiveCountLimit = 1000
	maxQueueName         = 80
	maxEntryID           = 80
	maxAttributeName     = 256
)

// MemoryConfig configures a Memory backend.
type MemoryConfig struct {
	// Logger receives a debug record when a message is dead-lettered or
	// expires. Nil discards.
	Logger *slog.Logger
}

func (c MemoryConfig) withDefaults() MemoryConfig {
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

// Memory is an in-process Backend with the semantics of an SQS standard
// queue: queues must be created first; per-queue default visibility timeout,
// delay, maximum message size and retention; per-message delays; a fresh
// receipt handle on every receive, so that a handle from before a
// redelivery no longer deletes or extends the message; long polls that
// return as soon as a message becomes visible; and redrive: a message that
// has been received MaxReceiveCount times is moved to the dead-letter queue
// instead of being received again, keeping its id, body, attributes and sent
// time, with its receive count starting again at zero.
//
// Choices where SQS leaves room, or where Memory differs from it:
//   - It keeps nothing across restarts.
//   - Receive returns messages in the order they became visible, and at
//     most once per visibility period (SQS may deliver twice).
//   - Durations are honoured exactly, below a second too; SQS counts whole
//     seconds.
//   - Entry.Delay 0 and ReceiveOptions.Visibility 0 use the queue's default;
//     a zero Spec.VisibilityTimeout means 30 s, as when SQS is not given one.
//   - Retention is enforced lazily: an expired message is discarded when a
//     receive or Depth comes across it, so Depth may count it until then.
//   - Delete with a handle that is not the message's latest one fails with
//     ErrReceiptHandle, and so does a second Delete of the same message.
//   - ChangeVisibility of a message whose visibility timeout has passed
//     fails with ErrReceiptHandle (SQS: MessageNotInflight).
//   - There is no limit on in-flight messages (SQS: about 120,000).
//   - A message's Entry.GroupID is kept, across redrive too, and given
//     back in Message.GroupID; it does not change the order of receives
//     (SQS fair queues reorder them when a group holds too many of the
//     messages in flight).
//
// Memory starts no goroutines and is safe for concurrent use. Each queue has
// its own lock; ready messages sit in a FIFO and delayed or in-flight ones in
// a min-heap by due time, so each operation costs O(log n).
type Memory struct {
	log *slog.Logger
	tag string // random hex; prefixes receipt handles of this Memory
	ids [8]byte
	seq atomic.Uint64 // message keys and receipt nonces

	mu     sync.RWMutex
	queues map[string]*memQueue
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty Memory backend.
func NewMemory(cfg MemoryConfig) *Memory {
	cfg = cfg.withDefaults()
	m := &Memory{log: cfg.Logger, queues: make(map[string]*memQueue)}
	var tag [4]byte
	rand.Read(tag[:])
	rand.Read(m.ids[:])
	m.tag = hex.EncodeToString(tag[:])
	return m
}

// Create creates a queue, or sets the attributes of an existing one to the
// spec. A dead-letter queue must exist before a queue that names it.
func (m *Memory) Create(ctx context.Context, spec Spec) (CreateResult, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	attrs, err := normalizeSpec(spec)
	if err != nil {
		return 0, fmt.Errorf("create queue %q: %w", spec.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if attrs.deadLetter != "" {
		if _, ok := m.queues[attrs.deadLetter]; !ok {
			return 0, fmt.Errorf("create queue %q: dead-letter queue %q: %w", spec.Name, attrs.deadLetter, ErrQueueNotFound)
		}
	}
	q, ok := m.queues[spec.Name]
	if !ok {
		m.queues[spec.Name] = newMemQueue(spec.Name, attrs)
		return Created, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.attrs == attrs {
		return Unchanged, nil
	}
	q.attrs = attrs
	q.notify() // long polls re-read the attributes
	return Updated, nil
}

// normalizeSpec applies the defaults of SQS to spec and checks its limits.
func normalizeSpec(spec Spec) (queueAttrs, error) {
	a := queueAttrs{
		visibility:  cmp.Or(spec.VisibilityTimeout, VisibilityTimeoutDefault),
		delay:       spec.Delay,
		maxSize:     cmp.Or(spec.MaxMessageSize, MaxMessageSizeDefault),
		retention:   cmp.Or(spec.Retention, RetentionDefault),
		deadLetter:  spec.DeadLetter,
		maxReceives: spec.MaxReceiveCount,
	}
	switch {
	case !validName(spec.Name, maxQueueName):
		return a, errors.New("name must be 1-80 letters, digits, hyphens or underscores")
	case a.visibility < 0 || a.visibility > MaxVisibility:
		return a, fmt.Errorf("visibility timeout %v is outside 0-%v", a.visibility, MaxVisibility)
	case a.delay < 0 || a.delay > MaxDelay:
		return a, fmt.Errorf("delay %v is outside 0-%v", a.delay, MaxDelay)
	case a.maxSize < MinMessageSize || a.maxSize > MaxMessageSizeCap:
		return a, fmt.Errorf("maximum message size %d is outside %d-%d", a.maxSize, MinMessageSize, MaxMessageSizeCap)
	case a.retention < MinRetention || a.retention > MaxRetention:
		return a, fmt.Errorf("retention %v is outside %v-%v", a.retention, MinRetention, MaxRetention)
	case a.deadLetter == "" && a.maxReceives != 0:
		return a, errors.New("maximum receive count without a dead-letter queue")
	case a.deadLetter != "" && (a.maxReceives < 1 || a.maxReceives > MaxReceiveCountLimit):
		return a, fmt.Errorf("maximum receive count %d is outside 1-%d", a.maxReceives, MaxReceiveCountLimit)
	case a.deadLetter == spec.Name:
		return a, errors.New("a queue cannot be its own dead-letter queue")
	}
	return a, nil
}

// queue returns the named queue or an error wrapping ErrQueueNotFound.
func (m *Memory) queue(op, name string) (*memQueue, error) {
	m.mu.RLock()
	q := m.queues[name]
	m.mu.RUnlock()
	if q == nil {
		return nil, fmt.Errorf("%s %q: %w", op, name, ErrQueueNotFound)
	}
	return q, nil
}

// checkBatch checks the number of entries of a batch call.
func checkBatch(n int) error {
	switch {
	case n == 0:
		return ErrEmptyBatch
	case n > MaxBatch:
		return fmt.Errorf("%w: %d, at most %d", ErrTooManyEntries, n, MaxBatch)
	}
	return nil
}

// Send adds messages to a queue. Entries fail one by one (ErrTooLarge,
// ErrInvalidEntry) for an oversized message, an empty body, characters SQS
// does not accept, more than MaxAttributes attributes, an invalid attribute
// name or empty value, or a delay outside 0–MaxDelay. The whole call fails
// for an invalid or repeated entry ID or when the batch together is larger
// than MaxMessageSizeCap, as in SQS.
func (m *Memory) Send(ctx context.Context, queue string, entries []Entry) ([]SendResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkBatch(len(entries)); err != nil {
		return nil, fmt.Errorf("send to %q: %w", queue, err)
	}
	q, err := m.queue("send to", queue)
	if err != nil {
		return nil, err
	}
	var sizes [MaxBatch]int
	total := 0
	for i, e := range entries {
		if !validName(e.ID, maxEntryID) {
			return nil, fmt.Errorf("send to %q: entry id %q: %w", queue, e.ID, ErrInvalidEntry)
		}
		for _, prev := range entries[:i] {
			if prev.ID == e.ID {
				return nil, fmt.Errorf("send to %q: entry id %q repeated: %w", queue, e.ID, ErrInvalidEntry)
			}
		}
		sizes[i] = Size(e.Body, e.Attributes)
		total += sizes[i]
	}
	if total > MaxMessageSizeCap {
		return nil, fmt.Errorf("send to %q: batch of %d bytes, at most %d: %w", queue, total, MaxMessageSizeCap, ErrTooLarge)
	}

	q.mu.Lock()
	attrs := q.attrs
	q.mu.Unlock()

	now := time.Now()
	results := make([]SendResult, len(entries))
	msgs := make([]message, len(entries)) // one allocation for the batch
	for i, e := range entries {
		results[i].ID = e.ID
		if err := checkSizedEntry(e, sizes[i], attrs.maxSize); err != nil {
			results[i].Err = err
			continue
		}
		key := m.seq.Add(1)
		msgs[i] = message{
			key:    key,
			id:     m.messageID(key),
			body:   e.Body,
			attrs:  maps.Clone(e.Attributes),
			group:  e.GroupID,
			sentAt: now,
			due:    now.Add(cmp.Or(e.Delay, attrs.delay)),
		}
		results[i].MessageID = msgs[i].id
	}

	q.mu.Lock()
	for i := range msgs {
		msg := &msgs[i]
		if msg.key == 0 {
			continue
		}
		q.byKey[msg.key] = msg
		if msg.due.After(now) {
			q.schedule(msg, stateDelayed, msg.due)
		} else {
			q.makeVisible(msg)
		}
	}
	q.mu.Unlock()
	return results, nil
}

// checkEntry checks one entry as SQS does.
func checkEntry(e Entry, maxSize int) error {
	return checkSizedEntry(e, Size(e.Body, e.Attributes), maxSize)
}

// checkSizedEntry is checkEntry for an entry whose Size is known.
func checkSizedEntry(e Entry, size, maxSize int) error {
	if size > maxSize {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, size, maxSize)
	}
	if e.Body == "" {
		return fmt.Errorf("%w: empty body", ErrInvalidEntry)
	}
	if !validText(e.Body) {
		return fmt.Errorf("%w: body has characters SQS does not accept", ErrInvalidEntry)
	}
	if len(e.Attributes) > MaxAttributes {
		return fmt.Errorf("%w: %d attributes, at most %d", ErrInvalidEntry, len(e.Attributes), MaxAttributes)
	}
	for k, v := range e.Attributes {
		if !validAttributeName(k) {
			return fmt.Errorf("%w: attribute name %q", ErrInvalidEntry, k)
		}
		if v == "" || !validText(v) {
			return fmt.Errorf("%w: attribute %q must have a non-empty value of valid characters", ErrInvalidEntry, k)
		}
	}
	if e.Delay < 0 || e.Delay > MaxDelay {
		return fmt.Errorf("%w: delay %v is outside 0-%v", ErrInvalidEntry, e.Delay, MaxDelay)
	}
	if e.GroupID != "" && !ValidGroupID(e.GroupID) {
		return fmt.Errorf("%w: group id %q: want 1-%d letters, digits or ASCII punctuation", ErrInvalidEntry, e.GroupID, MaxGroupID)
	}
	return nil
}

// ValidGroupID reports whether s is a MessageGroupId SQS accepts: 1 to
// MaxGroupID letters, digits or ASCII punctuation (!"#$%&'()*+,-./:;<=>?@
// [\]^_`{|}~), which is every printable ASCII character but the space.
func ValidGroupID(s string) bool {
	if s == "" || len(s) > MaxGroupID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Receive receives up to opts.Max messages, waiting up to opts.Wait for the
// first one to become visible. It returns as soon as at least one message
// was received, when the wait ends, or with ctx.Err() when ctx ends.
func (m *Memory) Receive(ctx context.Context, queue string, opts ReceiveOptions) ([]Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := cmp.Or(opts.Max, MaxBatch)
	switch {
	case limit > MaxBatch:
		return nil, fmt.Errorf("receive from %q: max %d: %w", queue, limit, ErrTooManyEntries)
	case limit < 0:
		return nil, fmt.Errorf("receive from %q: max %d is negative", queue, limit)
	case opts.Wait < 0 || opts.Wait > MaxWait:
		return nil, fmt.Errorf("receive from %q: wait %v is outside 0-%v", queue, opts.Wait, MaxWait)
	case opts.Visibility < 0 || opts.Visibility > MaxVisibility:
		return nil, fmt.Errorf("receive from %q: visibility %v is outside 0-%v", queue, opts.Visibility, MaxVisibility)
	}
	q, err := m.queue("receive from", queue)
	if err != nil {
		return nil, err
	}

	start := time.Now()
	deadline := start.Add(opts.Wait)
	var timer *time.Timer
	for now := start; ; now = time.Now() {
		q.mu.Lock()
		out, moved := m.take(q, now, limit, opts.Visibility)
		if len(out) > 0 || !now.Before(deadline) {
			q.mu.Unlock()
			m.deadLetter(q, moved)
			for i := range out {
				out[i].Attributes = maps.Clone(out[i].Attributes)
			}
			if timer != nil {
				timer.Stop()
			}
			return out, nil
		}
		next := deadline
		if due, ok := q.nextDue(); ok && due.Before(next) {
			next = due
		}
		wake := q.wakeChan(next)
		q.mu.Unlock()
		m.deadLetter(q, moved)

		if timer == nil {
			timer = time.NewTimer(next.Sub(now))
		} else {
			timer.Reset(next.Sub(now))
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
	}
}

// take receives up to limit visible messages of q for visibility (0: the
// queue's default). Messages that have used up their receives are taken out
// of q and returned in moved, for the caller to put on the dead-letter queue
// once it has released q. The Attributes of the returned messages are q's
// own maps. Call with q.mu held.
func (m *Memory) take(q *memQueue, now time.Time, limit int, visibility time.Duration) (out []Message, moved []*message) {
	expired := q.promote(now)
	visibility = cmp.Or(visibility, q.attrs.visibility)
	for len(out) < limit {
		msg := q.visible.pop()
		if msg == nil {
			break
		}
		if msg.state != stateVisible {
			continue // deleted while visible
		}
		if q.expired(msg, now) {
			q.remove(msg)
			expired++
			continue
		}
		if q.attrs.deadLetter != "" && msg.receives >= q.attrs.maxReceives {
			q.remove(msg)
			moved = append(moved, msg)
			continue
		}
		q.nVisible--
		msg.receives++
		msg.receivedAt = now
		if msg.firstReceivedAt.IsZero() {
			msg.firstReceivedAt = now
		}
		msg.receipt = m.seq.Add(1)
		q.schedule(msg, stateInFlight, now.Add(visibility))
		if out == nil {
			out = make([]Message, 0, min(limit, q.visible.len()+1))
		}
		out = append(out, Message{
			ID:              msg.id,
			ReceiptHandle:   m.receiptHandle(msg.key, msg.receipt),
			Body:            msg.body,
			Attributes:      msg.attrs,
			SentAt:          msg.sentAt,
			FirstReceivedAt: msg.firstReceivedAt,
			ReceiveCount:    msg.receives,
			GroupID:         msg.group,
		})
	}
	if expired > 0 {
		m.log.Debug("messages expired", "queue", q.name, "count", expired, "retention", q.attrs.retention)
	}
	return out, moved
}

// deadLetter puts messages taken out of src onto src's dead-letter queue.
// Call without src.mu held: the two locks are never held together, so
// queues may name each other as dead-letter queues.
func (m *Memory) deadLetter(src *memQueue, moved []*message) {
	if len(moved) == 0 {
		return
	}
	src.mu.Lock()
	name := src.attrs.deadLetter
	src.mu.Unlock()
	if name == "" {
		// The redrive policy was removed since the messages were taken:
		// they go back where they were.
		name = src.name
	}
	dlq, err := m.queue("dead-letter", name)
	if err != nil {
		// Queues are never deleted and Create checks that the dead-letter
		// queue exists, so this is a broken invariant.
		panic(err)
	}
	dlq.mu.Lock()
	for _, msg := range moved {
		receives := msg.receives
		msg.key = m.seq.Add(1)
		msg.receives, msg.receipt = 0, 0
		msg.firstReceivedAt, msg.receivedAt = time.Time{}, time.Time{}
		dlq.byKey[msg.key] = msg
		dlq.makeVisible(msg)
		m.log.Debug("message dead-lettered", "queue", src.name, "dead_letter_queue", dlq.name,
			"message_id", msg.id, "receives", receives)
	}
	dlq.mu.Unlock()
}

// Delete deletes messages by their latest receipt handles.
func (m *Memory) Delete(ctx context.Context, queue string, handles []string) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkBatch(len(handles)); err != nil {
		return nil, fmt.Errorf("delete from %q: %w", queue, err)
	}
	q, err := m.queue("delete from", queue)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(handles))
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, h := range handles {
		msg := m.lookup(q, h)
		if msg == nil {
			errs[i] = ErrReceiptHandle
			continue
		}
		q.remove(msg)
	}
	return errs, nil
}

// ChangeVisibility sets the visibility timeouts of in-flight messages,
// counted from now. Timeout 0 makes a message visible at once. A timeout
// outside 0–MaxVisibility, or one that would end more than MaxVisibility
// after the message was received, fails with ErrInvalidEntry.
func (m *Memory) ChangeVisibility(ctx context.Context, queue string, changes []VisibilityChange) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkBatch(len(changes)); err != nil {
		return nil, fmt.Errorf("change visibility in %q: %w", queue, err)
	}
	q, err := m.queue("change visibility in", queue)
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(changes))
	now := time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.promote(now) // messages whose timeout has passed are no longer in flight
	for i, c := range changes {
		if c.Timeout < 0 || c.Timeout > MaxVisibility {
			errs[i] = fmt.Errorf("%w: visibility timeout %v is outside 0-%v", ErrInvalidEntry, c.Timeout, MaxVisibility)
			continue
		}
		msg := m.lookup(q, c.ReceiptHandle)
		switch {
		case msg == nil:
			errs[i] = ErrReceiptHandle
		case msg.state != stateInFlight:
			errs[i] = fmt.Errorf("%w: message is not in flight", ErrReceiptHandle)
		case now.Add(c.Timeout).After(msg.receivedAt.Add(MaxVisibility)):
			errs[i] = fmt.Errorf("%w: visibility cannot end more than %v after the receive", ErrInvalidEntry, MaxVisibility)
		case c.Timeout == 0:
			q.unschedule(msg)
			q.makeVisible(msg)
		default:
			q.reschedule(msg, now.Add(c.Timeout))
		}
	}
	return errs, nil
}

// Depth reports the queue's message counts.
func (m *Memory) Depth(ctx context.Context, queue string) (Depth, error) {
	if err := ctx.Err(); err != nil {
		return Depth{}, err
	}
	q, err := m.queue("depth of", queue)
	if err != nil {
		return Depth{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.promote(time.Now())
	return Depth{Visible: q.nVisible, NotVisible: q.nInFlight, Delayed: q.nDelayed}, nil
}

// messageID returns an RFC 9562 version 8 UUID made of the Memory's random
// bits and a message key.
func (m *Memory) messageID(key uint64) string {
	var u [16]byte
	copy(u[:8], m.ids[:])
	binary.BigEndian.PutUint64(u[8:], key)
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // variant 10
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}

// A receipt handle is the Memory's tag, the message key and the receive's
// nonce, in hex.
const receiptHandleLen = 8 + 16 + 16

func (m *Memory) receiptHandle(key, nonce uint64) string {
	var b [receiptHandleLen]byte
	copy(b[:8], m.tag)
	var n [16]byte
	binary.BigEndian.PutUint64(n[:8], key)
	binary.BigEndian.PutUint64(n[8:], nonce)
	hex.Encode(b[8:], n[:])
	return string(b[:])
}

// lookup returns the message of q whose latest receipt handle is h, or nil.
// Call with q.mu held.
func (m *Memory) lookup(q *memQueue, h string) *message {
	if len(h) != receiptHandleLen || h[:8] != m.tag {
		return nil
	}
	key, err1 := strconv.ParseUint(h[8:24], 16, 64)
	nonce, err2 := strconv.ParseUint(h[24:], 16, 64)
	if err1 != nil || err2 != nil {
		return nil
	}
	msg := q.byKey[key]
	if msg == nil || msg.receipt != nonce || nonce == 0 {
		return nil
	}
	return msg
}

// validName reports whether s is 1 to max letters, digits, hyphens or
// underscores: the rule for SQS queue names and batch entry ids.
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validAttributeName applies the SQS rules for message attribute names.
func validAttributeName(s string) bool {
	if s == "" || len(s) > maxAttributeName || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	if hasPrefixFold(s, "aws.") || hasPrefixFold(s, "amazon.") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// hasPrefixFold reports whether s starts with prefix, ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// validText reports whether s is UTF-8 made only of the characters SQS
// accepts in a message: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
// #x10000-#x10FFFF.
func validText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r > 0xD7FF && r < 0xE000 || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += size
	}
	return true
}
