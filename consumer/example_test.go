package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/queue"
)

// A library user runs the worker with an in-process HandlerFunc instead of
// an HTTP push.
func Example() {
	ctx := context.Background()
	backend := queue.NewMemory(queue.MemoryConfig{})
	names := queue.PoolNames("example", 2)
	for _, name := range names.All() {
		if _, err := backend.Create(ctx, queue.Spec{Name: name}); err != nil {
			panic(err)
		}
	}
	meta := envelope.Meta{EnqueuedAt: time.Now().UnixMilli()}
	_, err := backend.Send(ctx, names.Live[1], []queue.Entry{{
		ID:   "1",
		Body: `{"invoice":42}`,
		Attributes: map[string]string{
			envelope.AttrTenant: "acme",
			envelope.AttrMeta:   meta.Encode(),
			"kind":              "invoice",
		},
	}})
	if err != nil {
		panic(err)
	}

	handled := make(chan struct{})
	w, err := consumer.New(consumer.Config{
		Backend: backend,
		Names:   names,
		Handler: consumer.HandlerFunc(func(ctx context.Context, m *consumer.Message) error {
			fmt.Printf("tenant %s, kind %s, attempt %d: %s\n", m.Tenant, m.Attributes["kind"], m.ReceiveCount, m.Body)
			close(handled)
			return nil // success: the message is deleted
		}),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	<-handled
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // the grace period
	defer cancel()
	if err := w.Stop(stopCtx); err != nil {
		panic(err)
	}
	d, _ := backend.Depth(ctx, names.Live[1])
	fmt.Println("left on the queue:", d.Visible+d.NotVisible)
	// Output:
	// tenant acme, kind invoice, attempt 1: {"invoice":42}
	// left on the queue: 0
}
