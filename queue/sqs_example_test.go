package queue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fairq/fairq/queue"
)

// An SQS backend for a deployment: its queues are created (or brought back
// to their spec) dead-letter queue first, then used by name. It needs AWS
// credentials from the default chain, so it is not run as a test.
func ExampleNewSQS() {
	ctx := context.Background()
	b, err := queue.NewSQS(ctx, queue.SQSConfig{
		Region:     "us-east-1",
		Registerer: prometheus.DefaultRegisterer, // fairq_sqs_requests_total{op}
	})
	if err != nil {
		log.Fatal(err)
	}
	names := queue.PoolNames("fairq", 8)
	for _, name := range names.All() {
		spec := queue.Spec{Name: name}
		if name != names.DLQ {
			spec.DeadLetter, spec.MaxReceiveCount = names.DLQ, 10
		}
		res, err := b.Create(ctx, spec)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(name, res)
	}
}
