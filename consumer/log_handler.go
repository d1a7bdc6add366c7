package consumer

import (
	"cmp"
	"context"
	"log/slog"
)

// LogHandler is the Handler of `fairq dev` without a push URL: it logs each
// message (tenant, id, queue, size and receive count, never the body) and
// succeeds, so the message is deleted.
type LogHandler struct {
	log *slog.Logger
}

var _ Handler = (*LogHandler)(nil)

// NewLogHandler returns a LogHandler logging to logger. Like every
// component of fairq it uses no global logger: a nil logger logs nothing,
// which leaves a handler that only acknowledges messages (a sink for
// tests and benchmarks); pass the process's logger to see them.
func NewLogHandler(logger *slog.Logger) *LogHandler {
	return &LogHandler{log: cmp.Or(logger, slog.New(slog.DiscardHandler))}
}

// Handle logs m at level Info.
func (h *LogHandler) Handle(ctx context.Context, m *Message) error {
	if !h.log.Enabled(ctx, slog.LevelInfo) {
		return nil // not even the attributes, under load at log.level warn
	}
	attrs := []slog.Attr{
		slog.String("tenant", m.Tenant),
		slog.String("id", m.ID),
		slog.String("queue", m.Queue),
		slog.Int("size", len(m.Body)),
		slog.Int("receive_count", m.ReceiveCount),
	}
	if m.Task != nil {
		attrs = append(attrs, slog.String("task", m.Task.Name), slog.Time("scheduled_at", m.Task.ScheduledAt))
	}
	h.log.LogAttrs(ctx, slog.LevelInfo, "message", attrs...)
	return nil
}
