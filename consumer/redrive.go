package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// RedriveHoldDefault is how long a redrive keeps the dead letters it skips
// (another tenant's) invisible, so as not to read them twice in one run.
const RedriveHoldDefault = 15 * time.Minute

// redriveWait is the long-poll wait of the redrive's receives: the run ends
// at the first receive that waited this long for nothing.
const redriveWait = time.Second

// RedriveConfig configures a redrive: `fairq dlq redrive` and
// POST /admin/v1/dlq/redrive.
type RedriveConfig struct {
	Backend Backend     // required
	Names   queue.Names // required: the dead-letter queue and the live queues
	Picker  Picker      // required: the tenant's shard
	// Tenant limits the redrive to one tenant's dead letters; empty moves
	// every tenant's.
	Tenant string
	// Max moves at most this many; 0 moves them all.
	Max int
	// Backlog is told of each message moved back; nil keeps no counts.
	Backlog BacklogAdder
	// Hold is how long skipped dead letters stay invisible while the
	// redrive runs; default RedriveHoldDefault. They are made visible
	// again when it ends.
	Hold   time.Duration
	Logger *slog.Logger // nil: logs nothing
}

func (c RedriveConfig) withDefaults() RedriveConfig {
	c.Hold = cmp.Or(c.Hold, RedriveHoldDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Backlog == nil {
		c.Backlog = backlog.Off{}
	}
	return c
}

func (c RedriveConfig) validate() error {
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
	if c.Max < 0 {
		errs = append(errs, fmt.Errorf("max %d is negative", c.Max))
	}
	if c.Hold < 0 || c.Hold > queue.MaxVisibility {
		errs = append(errs, fmt.Errorf("hold %v is outside [0, %v]", c.Hold, queue.MaxVisibility))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: redrive: %w", ErrInvalidConfig, err)
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

// Redrive moves dead letters back to their tenant's shard: each is sent to
// the live queue the Picker chooses for its tenant, with its attempts reset
// to zero and its last error cleared (its body, attributes and enqueue time
// kept), then deleted from the dead-letter queue. It stops after Max
// messages, or when a receive from the dead-letter queue comes back empty;
// the dead letters it skipped are made visible again before it returns.
// A message sent back whose delete fails is in both queues; it is
// counted as moved and logged.
//
// Cancelling ctx stops the redrive between batches of up to ten: a batch
// once received is sent back and deleted from the dead-letter queue (and
// counted in the backlog) whatever becomes of ctx, so that a redrive cut
// short, by a closed request or an interrupt, moves no message twice.
//
// A redriven message older than worker.backlog_age goes through the
// backlog queue, like any old message.
func Redrive(ctx context.Context, cfg RedriveConfig) (RedriveResult, error) {
	cfg = cfg.withDefaults()
	r := &redrive{cfg: cfg, res: RedriveResult{ByTenant: map[string]int{}}}
	if err := cfg.validate(); err != nil {
		return r.res, err
	}
	defer func() {
		release(context.WithoutCancel(ctx), cfg, r.held)
	}()
	for cfg.Max == 0 || r.res.Moved < cfg.Max {
		want := queue.MaxBatch
		if cfg.Max > 0 {
			want = min(want, cfg.Max-r.res.Moved)
		}
		msgs, err := cfg.Backend.Receive(ctx, cfg.Names.DLQ, queue.ReceiveOptions{Max: want, Wait: redriveWait, Visibility: cfg.Hold})
		if err != nil {
			return r.res, fmt.Errorf("redrive: receive from %s: %w", cfg.Names.DLQ, err)
		}
		if len(msgs) == 0 {
			break
		}
		byQueue, err := r.pick(msgs)
		if err != nil {
			return r.res, err
		}
		for q, ps := range byQueue {
			r.sendBack(ctx, q, ps)
		}
	}
	return r.res, nil
}

// redrive is one Redrive under way.
type redrive struct {
	cfg  RedriveConfig
	res  RedriveResult
	held []string // receipt handles to make visible again
}

// pick chooses the live queue of each dead letter of the tenant redriven
// and holds the others.
func (r *redrive) pick(msgs []queue.Message) (map[int][]pending, error) {
	byQueue := map[int][]pending{}
	for _, m := range msgs {
		tenant := m.Attributes[envelope.AttrTenant]
		if r.cfg.Tenant != "" && tenant != r.cfg.Tenant {
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
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCallTimeout)
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
func finish(ctx context.Context, cfg RedriveConfig, sent []pending, handles []string, added map[string]int64) {
	dctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
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
func release(ctx context.Context, cfg RedriveConfig, handles []string) {
	ctx, cancel := context.WithTimeout(ctx, batchCallTimeout)
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
			cfg.Logger.Warn("redrive: skipped dead letters stay invisible until their hold ends", "hold", cfg.Hold, "err", err)
		}
	}
}

// Redriver runs redrives with a fixed configuration; its Redrive method is
// the seam of the gateway's POST /admin/v1/dlq/redrive.
type Redriver struct {
	cfg RedriveConfig
}

// NewRedriver returns a Redriver, or an error wrapping ErrInvalidConfig.
// The Tenant and Max of cfg are ignored: each call gives its own.
func NewRedriver(cfg RedriveConfig) (*Redriver, error) {
	cfg = cfg.withDefaults()
	cfg.Tenant, cfg.Max = "", 0
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Redriver{cfg: cfg}, nil
}

// Run redrives the dead letters of tenant (empty: all), at most max (0:
// all), and reports the counts.
func (r *Redriver) Run(ctx context.Context, tenant string, max int) (RedriveResult, error) {
	cfg := r.cfg
	cfg.Tenant, cfg.Max = tenant, max
	return Redrive(ctx, cfg)
}

// Redrive redrives like Run and returns the number of messages moved.
func (r *Redriver) Redrive(ctx context.Context, tenant string, max int) (int, error) {
	res, err := r.Run(ctx, tenant, max)
	return res.Moved, err
}
