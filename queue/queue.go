package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Limits SQS imposes on every standard queue; both backends enforce them.
const (
	MaxBatch              = 10               // entries per Send, Receive, Delete, ChangeVisibility
	MaxWait               = 20 * time.Second // longest long poll
	MaxDelay              = 900 * time.Second
	MaxVisibility         = 12 * time.Hour
	MaxAttributes         = 10
	MaxMessageSizeCap     = 1 << 20   // largest MaxMessageSize SQS allows
	MaxMessageSizeDefault = 256 << 10 // the size most queues still have
	MaxGroupID            = 128       // characters of a MessageGroupId
)

// Sentinel errors both backends return, so callers can match on them.
var (
	ErrQueueNotFound  = errors.New("queue does not exist")
	ErrTooManyEntries = errors.New("too many entries in batch")
	ErrEmptyBatch     = errors.New("empty batch")
	ErrTooLarge       = errors.New("message too large")
	ErrInvalidEntry   = errors.New("invalid batch entry")
	ErrReceiptHandle  = errors.New("receipt handle is invalid or expired")
)

// Entry is one message to send.
type Entry struct {
	// ID identifies the entry within its batch; results refer to it.
	ID         string
	Body       string
	Attributes map[string]string // String-typed message attributes
	Delay      time.Duration     // 0–900 s, whole seconds
	// GroupID is the message's group (SQS's MessageGroupId): on a standard
	// queue, the tenant that SQS fair queues keep from delaying the others
	// (see Grouped). Empty sends the message in no group. At most
	// MaxGroupID characters, each a letter, digit or ASCII punctuation.
	GroupID string
}

// EntryID returns the Entry.ID of the i-th entry of a batch, its position
// in decimal ("0" to "9"): ids a result can be mapped back by without a
// lookup, and made without allocating.
func EntryID(i int) string { return entryIDs[i] }

var entryIDs = func() (ids [MaxBatch]string) {
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	return ids
}()

// SendResult is the outcome of one Entry, in the order the entries were given.
type SendResult struct {
	ID        string // the Entry's ID
	MessageID string // the queue's id for the message; empty when Err is set
	Err       error
}

// Message is a received message.
type Message struct {
	ID              string
	ReceiptHandle   string
	Body            string
	Attributes      map[string]string // String-typed message attributes
	SentAt          time.Time         // SentTimestamp
	FirstReceivedAt time.Time         // ApproximateFirstReceiveTimestamp
	ReceiveCount    int               // ApproximateReceiveCount, this delivery included
	// GroupID is the Entry.GroupID the message was sent with, where the
	// backend gives it back (Memory does; SQS returns it as the
	// MessageGroupId system attribute).
	GroupID string
}

// Size reports the size of a message as SQS counts it against the limit: the
// body plus each attribute's name, data type ("String") and value.
func Size(body string, attrs map[string]string) int {
	n := len(body)
	for k, v := range attrs {
		n += len(k) + len("String") + len(v)
	}
	return n
}

// ReceiveOptions controls one Receive.
type ReceiveOptions struct {
	Max        int           // 1–10; 0 means 10
	Wait       time.Duration // long poll, 0–20 s; 0 returns at once
	Visibility time.Duration // 0 uses the queue's default
}

// VisibilityChange sets a received message's visibility timeout, counted
// from now.
type VisibilityChange struct {
	ReceiptHandle string
	Timeout       time.Duration
}

// Depth is a queue's approximate message counts.
type Depth struct {
	Visible    int // ApproximateNumberOfMessages
	NotVisible int // ApproximateNumberOfMessagesNotVisible (in flight)
	Delayed    int // ApproximateNumberOfMessagesDelayed
}

// Spec describes a queue to create.
type Spec struct {
	Name              string
	VisibilityTimeout time.Duration // default visibility of received messages
	Delay             time.Duration // default delay of sent messages
	MaxMessageSize    int           // bytes, 1 KiB – 1 MiB; 0 uses 256 KiB
	Retention         time.Duration // 0 uses 4 days
	// DeadLetter names the queue that receives messages received more than
	// MaxReceiveCount times; empty sets no redrive policy.
	DeadLetter      string
	MaxReceiveCount int
}

// CreateResult says what Create did.
type CreateResult int

const (
	Created   CreateResult = iota + 1 // the queue did not exist
	Unchanged                         // it existed with these attributes
	Updated                           // it existed and its attributes were set to the spec
)

func (r CreateResult) String() string {
	switch r {
	case Created:
		return "created"
	case Unchanged:
		return "unchanged"
	case Updated:
		return "updated"
	}
	return fmt.Sprintf("CreateResult(%d)", int(r))
}

// Backend is a message store with the semantics of an Amazon SQS standard
// queue. Queues are named, not addressed by URL. Batch calls take at most
// MaxBatch entries and report per-entry failures in their results; the error
// return is for failures of the whole call.
type Backend interface {
	Send(ctx context.Context, queue string, entries []Entry) ([]SendResult, error)
	Receive(ctx context.Context, queue string, opts ReceiveOptions) ([]Message, error)
	// Delete deletes received messages; errs[i] is the outcome of handles[i].
	Delete(ctx context.Context, queue string, handles []string) (errs []error, err error)
	// ChangeVisibility changes visibility timeouts; errs[i] is the outcome of changes[i].
	ChangeVisibility(ctx context.Context, queue string, changes []VisibilityChange) (errs []error, err error)
	Depth(ctx context.Context, queue string) (Depth, error)
	Create(ctx context.Context, spec Spec) (CreateResult, error)
}
