package queue

import "fmt"

// Names are the queue names of one deployment (a contract: operators and IAM policies name them).
type Names struct {
	Live     []string // prefix-live-00 … the shuffle-sharded pool
	Overflow string   // prefix-overflow
	Backlog  string   // prefix-backlog
	DLQ      string   // prefix-dlq
}

// PoolNames returns the names for a prefix and a pool of n live queues.
func PoolNames(prefix string, n int) Names {
	live := make([]string, n)
	for i := range live {
		live[i] = fmt.Sprintf("%s-live-%02d", prefix, i)
	}
	return Names{
		Live:     live,
		Overflow: prefix + "-overflow",
		Backlog:  prefix + "-backlog",
		DLQ:      prefix + "-dlq",
	}
}

// All returns every queue name, the dead-letter queue first so that it
// exists before the queues whose redrive policy names it.
func (n Names) All() []string {
	all := make([]string, 0, len(n.Live)+3)
	all = append(all, n.DLQ)
	all = append(all, n.Live...)
	return append(all, n.Overflow, n.Backlog)
}
