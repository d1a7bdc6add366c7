package client_test

import (
	"context"
	"testing"

	"github.com/fairq/fairq/client"
	"github.com/fairq/fairq/tenant"
)

// BenchmarkEnqueue is one Enqueue round trip over loopback HTTP to a real
// gateway in process on the memory backend: the client's encoding and
// decoding, net/http's, and the gateway's work for one message.
func BenchmarkEnqueue(b *testing.B) {
	rate, burst := 1e9, 1<<30
	url, stop := startGateway(tenant.Limits{IngestRate: &rate, IngestBurst: &burst})
	defer stop()
	c, err := client.New(url, "acme-key")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := client.Message{Body: `{"order":42,"lines":[{"sku":"A-1","qty":2}]}`, Attributes: map[string]string{"kind": "invoice"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Enqueue(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}
