package sharding_test

import (
	"context"
	"fmt"

	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/sharding"
)

func ExamplePool_Shard() {
	pool, err := sharding.NewPool(8, 2)
	if err != nil {
		panic(err)
	}
	fmt.Println(pool.Shard("acme"), pool.Shard("globex"))
	// Output: [0 3] [3 4]
}

func ExampleOverlap() {
	// For N=100, k=2: the chance that a noisy tenant holds both queues of
	// another tenant's shard, and the chance that it holds one of them.
	fmt.Println(sharding.Overlap(100, 2, 2).RatString(), sharding.Overlap(100, 2, 1).FloatString(4))
	// Output: 1/4950 0.0396
}

// depths is a DepthReader of fixed depths.
type depths map[string]int

func (d depths) Depth(_ context.Context, q string) (queue.Depth, error) {
	return queue.Depth{Visible: d[q]}, nil
}

func ExampleTracker_Pick() {
	names := queue.PoolNames("fairq", 8).Live // acme's shard is queues 0 and 3
	tracker, err := sharding.NewTracker(sharding.Config{
		Reader: depths{"fairq-live-00": 3},
		Queues: names,
	})
	if err != nil {
		panic(err)
	}
	// Start would read the depths once a second; one reading is enough here.
	if err := tracker.Refresh(context.Background()); err != nil {
		panic(err)
	}
	for range 3 {
		q := tracker.Pick("acme") // counts the message on q at once
		fmt.Println(names[q])
	}
	// The send of the third message failed: take it back.
	tracker.Sent(3, -1)
	d0, _ := tracker.Estimate(0)
	d3, _ := tracker.Estimate(3)
	fmt.Println(d0, d3)
	// Output:
	// fairq-live-03
	// fairq-live-03
	// fairq-live-03
	// 3 2
}
