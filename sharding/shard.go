package sharding

import (
	"strconv"
	"strings"
)

// MaxShardSize is the largest k a Pool accepts.
const MaxShardSize = 8

// Shard is a tenant's set of k distinct queue indices, in ascending order.
// It is a small value: copying it does not allocate.
type Shard struct {
	n int8
	q [MaxShardSize]uint16
}

// Len returns k, the number of queues in the shard.
func (s Shard) Len() int { return int(s.n) }

// Queue returns the i-th queue index of the shard, 0 ≤ i < Len.
func (s Shard) Queue(i int) int { return int(s.q[:s.n][i]) }

// Contains reports whether queue index q is in the shard.
func (s Shard) Contains(q int) bool {
	for _, x := range s.q[:s.n] {
		if int(x) == q {
			return true
		}
	}
	return false
}

// Common returns the number of queues s and o have in common.
func (s Shard) Common(o Shard) int {
	n := 0
	for _, x := range s.q[:s.n] {
		if o.Contains(int(x)) {
			n++
		}
	}
	return n
}

// Queues returns the queue indices as a new slice.
func (s Shard) Queues() []int {
	qs := make([]int, s.n)
	for i := range qs {
		qs[i] = int(s.q[i])
	}
	return qs
}

// String formats the shard as "[3 7]".
func (s Shard) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range s.q[:s.n] {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(int(x)))
	}
	b.WriteByte(']')
	return b.String()
}
