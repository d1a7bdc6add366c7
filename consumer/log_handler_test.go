package consumer_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
)

// TestLogHandler: each message is logged with its tenant, id, queue, size
// and receive count, never its body, and acknowledged; without a logger it
// only acknowledges.
func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	m := &consumer.Message{ID: "m-1", Queue: "fairq-live-00", Body: "secret body", Tenant: "acme", ReceiveCount: 2}
	task := &consumer.Message{ID: "m-2", Queue: "fairq-live-01", Task: &envelope.Task{
		Name: "nightly", Path: "/nightly", ScheduledAt: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
	}}
	for _, h := range []*consumer.LogHandler{consumer.NewLogHandler(log), consumer.NewLogHandler(nil)} {
		for _, msg := range []*consumer.Message{m, task} {
			if err := h.Handle(context.Background(), msg); err != nil {
				t.Errorf("Handle(%s) = %v, want nil", msg.ID, err)
			}
		}
	}
	want := `level=INFO msg=message tenant=acme id=m-1 queue=fairq-live-00 size=11 receive_count=2
level=INFO msg=message tenant="" id=m-2 queue=fairq-live-01 size=0 receive_count=0 task=nightly scheduled_at=2026-01-02T03:04:00.000Z
`
	if got := buf.String(); got != want {
		t.Errorf("logged:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(buf.String(), "secret") {
		t.Errorf("the body was logged")
	}
}
