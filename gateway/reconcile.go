package gateway

import (
	"context"
	"log/slog"
	"time"
)

// reconciler is a Backlog that can be capped at the queues' total.
type reconciler interface {
	Reconcile(ctx context.Context, total int64) error
}

// reconcileLoop caps every tenant's backlog at the number of messages on
// the queues every ReconcileEvery: the larger of the last two readings,
// since SQS's approximate counts lag behind sends.
func (s *Server) reconcileLoop(ctx context.Context, rec reconciler) {
	t := time.NewTicker(s.cfg.ReconcileEvery)
	defer t.Stop()
	prev := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		total, err := s.queuedTotal(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "backlog reconciliation skipped: queue depths unreadable", slog.Any("err", err))
			}
			continue
		}
		if prev >= 0 {
			if err := rec.Reconcile(ctx, max(prev, total)); err != nil && ctx.Err() == nil {
				s.log.LogAttrs(ctx, slog.LevelWarn, "backlog reconciliation failed", slog.Any("err", err))
			}
		}
		prev = total
	}
}

// queuedTotal returns the number of messages on the live, overflow and
// backlog queues: visible, in flight and delayed.
func (s *Server) queuedTotal(ctx context.Context) (int64, error) {
	names := append([]string(nil), s.cfg.Names.Live...)
	for _, n := range []string{s.cfg.Names.Overflow, s.cfg.Names.Backlog} {
		if n != "" {
			names = append(names, n)
		}
	}
	var total int64
	for _, n := range names {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := s.cfg.Backend.Depth(dctx, n)
		cancel()
		if err != nil {
			return 0, err
		}
		total += int64(d.Visible + d.NotVisible + d.Delayed)
	}
	return total, nil
}
