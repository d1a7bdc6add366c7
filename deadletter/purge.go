package deadletter

import (
	"context"
	"errors"
	"fmt"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// PurgeResult counts what a purge did.
type PurgeResult struct {
	// Deleted is the number of dead letters deleted.
	Deleted int `json:"deleted"`
	// Remaining is true when the purge stopped at its maximum with dead
	// letters of the selection still there.
	Remaining bool `json:"remaining"`
}

// Purge deletes the dead letters of the selection, at most sel.Max (0:
// all). A batch once received is deleted whatever becomes of ctx, which is
// checked between batches.
func (dq *Queue) Purge(ctx context.Context, sel Selection) (PurgeResult, error) {
	cfg := dq.cfg
	var res PurgeResult
	if sel.Max < 0 {
		return res, fmt.Errorf("%w: max %d is negative", ErrInvalidConfig, sel.Max)
	}
	var held []string
	defer func() {
		release(context.WithoutCancel(ctx), cfg, held)
	}()
	for {
		if sel.Max > 0 && res.Deleted == sel.Max {
			// Stopped at the maximum: is there more?
			more, err := cfg.Backend.Receive(ctx, cfg.Names.DLQ, queue.ReceiveOptions{Max: queue.MaxBatch, Wait: scanWait, Visibility: cfg.Hold})
			for _, m := range more {
				held = append(held, m.ReceiptHandle)
				res.Remaining = res.Remaining || sel.takes(m.Attributes[envelope.AttrTenant], idOf(m))
			}
			return res, err
		}
		want := queue.MaxBatch
		if sel.Max > 0 {
			want = min(want, sel.Max-res.Deleted)
		}
		msgs, err := cfg.Backend.Receive(ctx, cfg.Names.DLQ, queue.ReceiveOptions{Max: want, Wait: scanWait, Visibility: cfg.Hold})
		if err != nil {
			return res, fmt.Errorf("purge: receive from %s: %w", cfg.Names.DLQ, err)
		}
		if len(msgs) == 0 {
			return res, nil
		}
		var handles []string
		for _, m := range msgs {
			if sel.takes(m.Attributes[envelope.AttrTenant], idOf(m)) {
				handles = append(handles, m.ReceiptHandle)
			} else {
				held = append(held, m.ReceiptHandle)
			}
		}
		if len(handles) == 0 {
			continue
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		errs, err := cfg.Backend.Delete(dctx, cfg.Names.DLQ, handles)
		cancel()
		if err != nil {
			return res, fmt.Errorf("purge: delete from %s: %w", cfg.Names.DLQ, err)
		}
		for i := range handles {
			if i >= len(errs) || errs[i] == nil {
				res.Deleted++
			}
		}
		if err := errors.Join(errs...); err != nil {
			cfg.Logger.Warn("purge: dead letters not deleted", "err", err)
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
}
