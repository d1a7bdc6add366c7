package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/fairq/fairq/client"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/gateway/gatewaytest"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
)

// startGateway runs a gateway in process, on the memory backend, for the
// tenant acme with the API key "acme-key", and returns its URL and how to
// stop it. limits are acme's own.
func startGateway(limits tenant.Limits) (url string, stop func()) {
	ctx := context.Background()
	backend := queue.NewMemory(queue.MemoryConfig{})
	names := queue.PoolNames("fairq", 2)
	for _, n := range names.All() {
		backend.Create(ctx, queue.Spec{Name: n})
	}
	tenants, err := tenant.New(tenant.Config{Tenants: []tenant.Spec{
		{ID: "acme", APIKeys: []string{tenant.HashKey("acme-key")}, Limits: limits},
	}})
	if err != nil {
		panic(err)
	}
	srv, err := gateway.New(gateway.Config{
		Backend: backend,
		Names:   names,
		Picker:  gatewaytest.NewRoundRobin(len(names.Live)), // sharding.Tracker in production
		Tenants: tenants,
	})
	if err != nil {
		panic(err)
	}
	srv.Start(ctx)
	ts := httptest.NewServer(srv)
	return ts.URL, func() {
		ts.Close()
		srv.Stop(ctx)
	}
}

func ExampleClient_Enqueue() {
	url, stop := startGateway(tenant.Limits{})
	defer stop()

	c, err := client.New(url, "acme-key")
	if err != nil {
		panic(err)
	}
	acc, err := c.Enqueue(context.Background(), client.Message{
		Body:       map[string]any{"order": 42},
		Attributes: map[string]string{"kind": "invoice"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(acc.Tenant, acc.Queue)
	// Output: acme fairq-live-00
}

func ExampleClient_EnqueueBatch() {
	url, stop := startGateway(tenant.Limits{})
	defer stop()

	c, err := client.New(url, "acme-key")
	if err != nil {
		panic(err)
	}
	results, err := c.EnqueueBatch(context.Background(), []client.Message{
		{Body: "first"},
		{Body: "second", DelaySeconds: 1000}, // more than 900
		{Body: "third"},
	})
	if err != nil {
		panic(err) // the batch as a whole: a bad key, no answer...
	}
	for i, r := range results {
		var e *client.Error
		if errors.As(r.Err, &e) {
			fmt.Println(i, "refused:", e.Status, e.Code)
			continue
		}
		fmt.Println(i, "on", r.Queue)
	}
	// Output:
	// 0 on fairq-live-00
	// 1 refused: 400 invalid_request
	// 2 on fairq-live-01
}

func ExampleWithIdempotencyKeys() {
	url, stop := startGateway(tenant.Limits{})
	defer stop()

	c, err := client.New(url, "acme-key", client.WithIdempotencyKeys())
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// Each Enqueue generates its own key, which its retries reuse; a key
	// of your own (an order number) makes repeats across calls one
	// message.
	m := client.Message{Body: "charge order 42", IdempotencyKey: "order-42"}
	first, _ := c.Enqueue(ctx, m)
	again, _ := c.Enqueue(ctx, m)
	fmt.Println(again.ID == first.ID, again.Replayed)
	// Output: true true
}

func ExampleError() {
	url, stop := startGateway(tenant.Limits{})
	defer stop()

	c, err := client.New(url, "not-a-key")
	if err != nil {
		panic(err)
	}
	_, err = c.Enqueue(context.Background(), client.Message{Body: "x"})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Code, errors.Is(err, client.ErrUnauthorized))
	}
	// Output: 401 unauthorized true
}

func ExampleClient_Tenant() {
	rate, burst := 5.0, 10
	url, stop := startGateway(tenant.Limits{IngestRate: &rate, IngestBurst: &burst})
	defer stop()

	c, err := client.New(url, "acme-key")
	if err != nil {
		panic(err)
	}
	t, err := c.Tenant(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(t.ID, t.Limits.IngestRate, t.Limits.IngestBurst)
	// Output: acme 5 10
}
