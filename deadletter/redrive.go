package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// Picker picks, for a tenant, the live queue of its shard a message goes
// to: an index into Names.Live. sharding.Tracker satisfies it (and its
// Sent, which the redrive calls to take back a pick whose send failed).
type Picker interface {
	Pick(tenant string) int
}

// BacklogAdder puts messages back on a tenant's backlog count: a
// redriven dead letter counts again until it ends. Add must not block
// (backlog.Tracker).
type BacklogAdder interface {
	Add(tenant string, n int64)
}

var (
	_ BacklogAdder = (*backlog.Tracker)(nil)
	_ BacklogAdder = backlog.Off{}
)

// HoldDefault is how long a redrive or a purge keeps the dead letters it
// skips (another tenant's) invisible, so as not to read them twice in one
// run; they are made visible again when it ends.
const HoldDefault = 15 * time.Minute

// callTimeout bounds one call to the queue service.
const callTimeout = 30 * time.Second

// scanWait is the long-poll wait of the receives of a redrive, a peek or a
// purge: each ends at the first receive that waited this long for nothing.
const scanWait = time.Second

// Backend is what the dead-letter tools need of a queue backend;
// queue.Backend satisfies it.
type Backend interface {
	Send(ctx context.Context, queue string, entries []queue.Entry) ([]queue.SendResult, error)
	Receive(ctx context.Context, queue string, opts queue.ReceiveOptions) ([]queue.Message, error)
	Delete(ctx context.Context, queue string, handles []string) ([]error, error)
	ChangeVisibility(ctx context.Context, queue string, changes []queue.VisibilityChange) ([]error, error)
}

var _ Backend = queue.Backend(nil)

// ErrInvalidConfig wraps the errors of New.
var ErrInvalidConfig = errors.New("invalid dead-letter config")

// Config configures a Queue.
type Config struct {
	Backend Backend     // required
	Names   queue.Names // required: the dead-letter queue and the live queues
	Picker  Picker      // required: the tenant's shard, for a redrive
	// Backlog is told of each message moved back; nil keeps no counts.
	Backlog BacklogAdder
	// Hold is how long skipped dead letters stay invisible while a redrive
	// or a purge runs; default HoldDefault.
	Hold   time.Duration
	Logger *slog.Logger // nil: logs nothing
}

func (c Config) withDefaults() Config {
	c.Hold = cmp.Or(c.Hold, HoldDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Backlog == nil {
		c.Backlog = backlog.Off{}
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Backend == nil {
		errs = append(errs, errors.New("backend is nil"))
	}
	if c.Picker == nil {
		errs = append(errs, errors.New("picker is nil"))
	}
	if c.Names.DLQ == "" || len(c.Names.Live) == 0 {
		errs = append(errs, errors.New("needs the dead-letter queue and the live queues"))
	}
	if c.Hold < 0 || c.Hold > queue.MaxVisibility {
		errs = append(errs, fmt.Errorf("hold %v is outside [0, %v]", c.Hold, queue.MaxVisibility))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// RedriveResult counts what a redrive did.
type RedriveResult struct {
	// Moved is the number of dead letters sent back to a live queue.
	Moved int `json:"moved"`
	// Skipped is the number of other tenants' dead letters seen and left.
	Skipped int `json:"skipped"`
	// Failed is the number that could not be sent back; they stay in the
	// dead-letter queue.
	Failed int `json:"failed"`
	// ByTenant counts Moved by tenant ("" for messages without one).
	ByTenant map[string]int `json:"by_tenant"`
}

// Queue is a deployment's dead-letter queue, with the tools that act on
// it: Redrive, Peek and Purge.
type Queue struct {
	cfg Config

	// peeked holds the dead letters the latest peeks hid, by id, with
	// their receipt handles: a redrive by id takes them from here while
	// they are hidden, since no receive can see them then.
	mu     sync.Mutex
	peeked map[string]peekedLetter
}

// peekedLetter is a dead letter a peek hid, until when.
type peekedLetter struct {
	m     queue.Message
	until time.Time
}

// peekMargin is how long before its hiding ends a peeked letter is no
// longer taken from memory: its receipt handle must still hold when the
// redrive deletes it.
const peekMargin = 10 * time.Second

// remember keeps the messages a peek hid.
func (dq *Queue) remember(msgs []queue.Message, until time.Time) {
	dq.mu.Lock()
	defer dq.mu.Unlock()
	now := time.Now()
	for id, p := range dq.peeked {
		if now.After(p.until) {
			delete(dq.peeked, id)
		}
	}
	for _, m := range msgs {
		dq.peeked[idOf(m)] = peekedLetter{m: m, until: until}
	}
}

// takePeeked removes and returns the peeked letters of sel's ids that are
// still hidden long enough to be moved.
func (dq *Queue) takePeeked(sel Selection) []queue.Message {
	dq.mu.Lock()
	defer dq.mu.Unlock()
	var out []queue.Message
	limit := time.Now().Add(peekMargin)
	for _, id := range sel.IDs {
		p, ok := dq.peeked[id]
		if !ok {
			continue
		}
		delete(dq.peeked, id)
		if p.until.After(limit) && sel.takes(p.m.Attributes[envelope.AttrTenant], id) {
			out = append(out, p.m)
		}
	}
	return out
}

// New returns a Queue, or an error wrapping ErrInvalidConfig.
func New(cfg Config) (*Queue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Queue{cfg: cfg, peeked: map[string]peekedLetter{}}, nil
}

// Selection says which dead letters an operation takes: a tenant's (all
// tenants' when empty), those of the ids named (any when empty), at most
// Max (0: all).
type Selection struct {
	Tenant string
	IDs    []string // fairq ids (X-Aws-Sqsd-Msgid)
	Max    int
}

// takes reports whether the selection takes the dead letter of tenant
// with id.
func (s Selection) takes(tenant, id string) bool {
	return (s.Tenant == "" || tenant == s.Tenant) && (len(s.IDs) == 0 || slices.Contains(s.IDs, id))
}

// Redrive moves dead letters back to their tenant's shard: each is sent to
// the live queue the Picker chooses for its tenant, with its attempts reset
// to zero and its last error cleared (its id, body, attributes and enqueue
// time kept), then deleted from the dead-letter queue. It stops after
// sel.Max messages, or when a receive from the dead-letter queue comes
// back empty; the dead letters it skipped are made visible again before it
// returns. A message sent back whose delete fails is in both queues; it is
// counted as moved and logged.
//
// Cancelling ctx stops the redrive between batches of up to ten: a batch
// once received is sent back and deleted from the dead-letter queue (and
// counted in the backlog) whatever becomes of ctx, so that a redrive cut
// short, by a closed request or an interrupt, moves no message twice.
//
// A redriven message older than worker.backlog_age goes through the
// backlog queue, like any old message.
//
// Dead letters named by id that a peek of this Queue hid are taken
// without a receive (a receive cannot see them until the peek's hiding
// ends); when all the ids named are found so, the queue is not read.
func (dq *Queue) Redrive(ctx context.Context, sel Selection) (RedriveResult, error) {
	cfg := dq.cfg
	r := &redrive{cfg: cfg, sel: sel, res: RedriveResult{ByTenant: map[string]int{}}}
	if sel.Max < 0 {
		return r.res, fmt.Errorf("%w: max %d is negative", ErrInvalidConfig, sel.Max)
	}
	defer func() {
		release(context.WithoutCancel(ctx), cfg, r.held)
	}()
	if len(sel.IDs) > 0 {
		found := dq.takePeeked(sel)
		if sel.Max > 0 && len(found) > sel.Max {
			found = found[:sel.Max] // the rest stay hidden until the peek's hiding ends
		}
		if err := r.move(ctx, found); err != nil {
			return r.res, err
		}
		if len(found) == len(sel.IDs) {
			return r.res, nil
		}
	}
	for sel.Max == 0 || r.res.Moved < sel.Max {
		want := queue.MaxBatch
		if sel.Max > 0 {
			want = min(want, sel.Max-r.res.Moved)
		}
		msgs, err := cfg.Backend.Receive(ctx, cfg.Names.DLQ, queue.ReceiveOptions{Max: want, Wait: scanWait, Visibility: cfg.Hold})
		if err != nil {
			return r.res, fmt.Errorf("redrive: receive from %s: %w", cfg.Names.DLQ, err)
		}
		if len(msgs) == 0 {
			break
		}
		if err := r.move(ctx, msgs); err != nil {
			return r.res, err
		}
	}
	return r.res, nil
}

// move sends back the dead letters of msgs the selection takes and holds
// the others.
func (r *redrive) move(ctx context.Context, msgs []queue.Message) error {
	byQueue, err := r.pick(msgs)
	if err != nil {
		return err
	}
	for q, ps := range byQueue {
		r.sendBack(ctx, q, ps)
	}
	return nil
}

// redrive is one Redrive under way.
type redrive struct {
	cfg  Config
	sel  Selection
	res  RedriveResult
	held []string // receipt handles to make visible again
}

// pick chooses the live queue of each dead letter of the tenant redriven
// and holds the others.
func (r *redrive) pick(msgs []queue.Message) (map[int][]pending, error) {
	byQueue := map[int][]pending{}
	for _, m := range msgs {
		tenant := m.Attributes[envelope.AttrTenant]
		if !r.sel.takes(tenant, idOf(m)) {
			r.res.Skipped++
			r.held = append(r.held, m.ReceiptHandle)
			continue
		}
		q := r.cfg.Picker.Pick(tenant)
		if q < 0 || q >= len(r.cfg.Names.Live) {
			return nil, fmt.Errorf("redrive: picker chose queue %d of %d", q, len(r.cfg.Names.Live))
		}
		byQueue[q] = append(byQueue[q], pending{m, tenant, q})
	}
	return byQueue, nil
}

// sendBack sends the dead letters ps to live queue q, then deletes those
// sent from the dead-letter queue.
func (r *redrive) sendBack(ctx context.Context, q int, ps []pending) {
	cfg := r.cfg
	entries := make([]queue.Entry, len(ps))
	for i, p := range ps {
		entries[i] = queue.Entry{ID: queue.EntryID(i), Body: p.m.Body, Attributes: resetAttempts(p.m)}
	}
	dest := cfg.Names.Live[q]
	// A send cut short might have reached the queue all the same, and its
	// dead letters, left where they are, would be redriven twice: a batch
	// once received is carried through, and ctx is checked between
	// batches.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	results, err := cfg.Backend.Send(sctx, dest, entries)
	cancel()
	var sent []pending
	for i, p := range ps {
		serr := err
		if serr == nil && i < len(results) {
			serr = results[i].Err
		}
		if serr != nil {
			r.failed(p, dest, serr)
			continue
		}
		sent = append(sent, p)
	}
	if len(sent) == 0 {
		return
	}
	handles := make([]string, len(sent))
	added := map[string]int64{}
	for i, p := range sent {
		handles[i] = p.m.ReceiptHandle
		r.res.Moved++
		r.res.ByTenant[p.tenant]++
		added[p.tenant]++
	}
	// Once the copies are sent, the dead letters must go, whatever becomes
	// of ctx (a closed HTTP request, a SIGINT): left in the dead-letter
	// queue they would be redriven again.
	finish(context.WithoutCancel(ctx), cfg, sent, handles, added)
}

// failed counts a dead letter that could not be sent back to dest, holds
// it, and gives its pick back.
func (r *redrive) failed(p pending, dest string, err error) {
	r.res.Failed++
	r.held = append(r.held, p.m.ReceiptHandle)
	if s, ok := r.cfg.Picker.(interface{ Sent(q, n int) }); ok {
		s.Sent(p.q, -1)
	}
	r.cfg.Logger.Warn("redrive: send failed", "id", p.m.ID, "tenant", p.tenant, "queue", dest, "err", err)
}

// finish deletes from the dead-letter queue the messages sent back (their
// receipt handles) and adds them to their tenants' backlog counters. ctx
// is not cancelled with the redrive: each step has its own timeout.
func finish(ctx context.Context, cfg Config, sent []pending, handles []string, added map[string]int64) {
	dctx, cancel := context.WithTimeout(ctx, callTimeout)
	errs, err := cfg.Backend.Delete(dctx, cfg.Names.DLQ, handles)
	cancel()
	for i, p := range sent {
		derr := err
		if derr == nil && i < len(errs) {
			derr = errs[i]
		}
		if derr != nil {
			cfg.Logger.Warn("redrive: sent back but not deleted from the dead-letter queue", "id", p.m.ID, "tenant", p.tenant, "err", derr)
		}
	}
	for tenant, n := range added {
		cfg.Backlog.Add(tenant, n)
	}
}

// pending is a dead letter on its way back to live queue q.
type pending struct {
	m      queue.Message
	tenant string
	q      int
}

// resetAttempts returns the attributes of a dead letter with its attempts
// and last error cleared in fairq-meta.
func resetAttempts(m queue.Message) map[string]string {
	attrs := make(map[string]string, len(m.Attributes)+1)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta])
	if err != nil || meta.EnqueuedAt == 0 {
		if _, ok := attrs[envelope.AttrMeta]; !ok && len(attrs) >= queue.MaxAttributes {
			return attrs // no room for fairq-meta
		}
		meta = envelope.Meta{EnqueuedAt: m.SentAt.UnixMilli()}
	}
	// The copy sent back is a new message to SQS; its identity stays.
	meta.ID = cmp.Or(meta.ID, m.ID)
	if meta.FirstReceivedAt == 0 && !m.FirstReceivedAt.IsZero() {
		meta.FirstReceivedAt = m.FirstReceivedAt.UnixMilli()
	}
	meta.Attempts, meta.LastError, meta.NotBefore = 0, "", 0
	attrs[envelope.AttrMeta] = meta.Encode()
	return attrs
}

// release makes held dead letters visible again.
func release(ctx context.Context, cfg Config, handles []string) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	for len(handles) > 0 {
		chunk := handles[:min(len(handles), queue.MaxBatch)]
		handles = handles[len(chunk):]
		changes := make([]queue.VisibilityChange, len(chunk))
		for i, h := range chunk {
			changes[i] = queue.VisibilityChange{ReceiptHandle: h}
		}
		errs, err := cfg.Backend.ChangeVisibility(ctx, cfg.Names.DLQ, changes)
		if err = cmp.Or(err, errors.Join(errs...)); err != nil {
			cfg.Logger.Warn("skipped dead letters stay invisible until their hold ends", "hold", cfg.Hold, "err", err)
		}
	}
}

// idOf returns the id a message goes by: its fairq id, else its SQS id.
func idOf(m queue.Message) string {
	if meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta]); err == nil && meta.ID != "" {
		return meta.ID
	}
	return m.ID
}
