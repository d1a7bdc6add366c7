package deadletter

import (
	"context"
	"fmt"
	"time"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// PeekHide is how long a peek hides the dead letters it returns, so that
// the next page shows others.
const PeekHide = time.Minute

// Letter is a dead letter as Peek shows it.
type Letter struct {
	ID     string // the fairq id (X-Aws-Sqsd-Msgid), else the SQS id
	Tenant string
	// Error is the last attempt's error; Attempts the deliveries made.
	Error      string
	Attempts   int
	EnqueuedAt time.Time
	// Queue is the queue the message was first sent to.
	Queue string
	// Body is the message's body, when asked for.
	Body *string
}

// Page is what a peek found: at most the number asked for, and whether
// more dead letters may be waiting.
type Page struct {
	Letters []Letter
	More    bool
}

// Peek returns up to sel.Max (1–100) dead letters of the selection, with
// their bodies if bodies is set, and hides them for PeekHide.
func (dq *Queue) Peek(ctx context.Context, sel Selection, bodies bool) (Page, error) {
	if sel.Max < 1 || sel.Max > 100 {
		return Page{}, fmt.Errorf("%w: peek of %d: want 1–100", ErrInvalidConfig, sel.Max)
	}
	cfg := dq.cfg
	var page Page
	var held, extra []string
	var shown []queue.Message // to redrive by id while hidden
	var hiddenUntil time.Time
	defer func() {
		release(context.WithoutCancel(ctx), cfg, append(held, extra...))
		dq.remember(shown, hiddenUntil)
	}()
	for len(page.Letters) < sel.Max {
		if hiddenUntil.IsZero() {
			hiddenUntil = time.Now().Add(PeekHide) // before the receive: the earliest its hiding can end
		}
		msgs, err := cfg.Backend.Receive(ctx, cfg.Names.DLQ, queue.ReceiveOptions{Max: queue.MaxBatch, Wait: scanWait, Visibility: PeekHide})
		if err != nil {
			return page, fmt.Errorf("peek: receive from %s: %w", cfg.Names.DLQ, err)
		}
		if len(msgs) == 0 {
			return page, nil
		}
		for _, m := range msgs {
			tenant := m.Attributes[envelope.AttrTenant]
			switch {
			case !sel.takes(tenant, idOf(m)):
				held = append(held, m.ReceiptHandle)
			case len(page.Letters) == sel.Max:
				extra = append(extra, m.ReceiptHandle) // for the next page
				page.More = true
			default:
				page.Letters = append(page.Letters, letterOf(m, bodies))
				shown = append(shown, m)
			}
		}
	}
	page.More = true
	return page, nil
}

// letterOf reads a dead letter.
func letterOf(m queue.Message, bodies bool) Letter {
	l := Letter{ID: m.ID, Tenant: m.Attributes[envelope.AttrTenant], EnqueuedAt: m.SentAt, Attempts: m.ReceiveCount}
	if meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta]); err == nil {
		l.ID = idOf(m)
		l.Error, l.Attempts, l.Queue = meta.LastError, meta.Attempts, meta.Origin
		if meta.EnqueuedAt != 0 {
			l.EnqueuedAt = meta.Enqueued()
		}
	}
	if bodies {
		b := m.Body
		l.Body = &b
	}
	return l
}
