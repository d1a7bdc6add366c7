package queue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fairq/fairq/queue"
)

func ExampleMemory() {
	ctx := context.Background()
	m := queue.NewMemory(queue.MemoryConfig{})

	// The dead-letter queue first, then the queue whose redrive names it.
	for _, spec := range []queue.Spec{
		{Name: "jobs-dlq"},
		{Name: "jobs", VisibilityTimeout: time.Minute, DeadLetter: "jobs-dlq", MaxReceiveCount: 3},
	} {
		res, err := m.Create(ctx, spec)
		fmt.Println(spec.Name, res, err)
	}

	res, _ := m.Send(ctx, "jobs", []queue.Entry{
		{ID: "1", Body: "resize image 42", Attributes: map[string]string{"fairq-tenant": "acme"}},
		{ID: "2", Body: "resize image 43", Delay: 10 * time.Second},
	})
	fmt.Println("sent", res[0].ID, res[0].Err, res[1].ID, res[1].Err)

	msgs, _ := m.Receive(ctx, "jobs", queue.ReceiveOptions{Wait: time.Second})
	for _, msg := range msgs {
		fmt.Println("received", msg.Body, msg.Attributes["fairq-tenant"], msg.ReceiveCount)
	}
	d, _ := m.Depth(ctx, "jobs")
	fmt.Printf("%+v\n", d)

	errs, _ := m.Delete(ctx, "jobs", []string{msgs[0].ReceiptHandle})
	fmt.Println("deleted", errs[0])
	// Output:
	// jobs-dlq created <nil>
	// jobs created <nil>
	// sent 1 <nil> 2 <nil>
	// received resize image 42 acme 1
	// {Visible:0 NotVisible:1 Delayed:1}
	// deleted <nil>
}
