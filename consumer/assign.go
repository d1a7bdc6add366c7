package consumer

import (
	"slices"

	"github.com/cespare/xxhash/v2"
)

// The workers of a fleet share the live queues instead of each receiving
// from all of them: each queue is watched by the k workers that score
// highest for it by rendezvous (highest random weight) hashing of the
// queue's name and the worker's id. Every worker computes the same answer
// from the same list of ids, with no coordination; a worker that joins
// takes from each queue it wins only the place of the lowest of its k
// watchers, and a worker that leaves gives each of its queues to the next
// in that queue's ranking, so that a change of the fleet moves about k·N/W
// of the N·k places and leaves the others where they were.

// score is worker w's rendezvous weight for queue q. The NUL between the
// names keeps ("ab", "c") apart from ("a", "bc"): neither SQS queue names
// nor worker ids hold one.
func score(q, w string) uint64 { return xxhash.Sum64String(q + "\x00" + w) }

// outranks reports whether worker a, of weight sa, ranks above worker b,
// of weight sb, for a queue; the id breaks the (unlikely) tie, so that
// every worker ranks the same way.
func outranks(sa uint64, a string, sb uint64, b string) bool {
	return sa > sb || sa == sb && a < b
}

// assign returns the indexes, in order, of the queues that worker self
// watches when each queue is watched by the k workers that rank highest
// for it: min(k, len(workers)) watchers per queue, every worker for every
// queue when k is 0 or at least the number of workers. workers lists each
// id once, in any order; a self that is not among them watches nothing.
func assign(queues []string, workers []string, self string, k int) []int {
	if !slices.Contains(workers, self) {
		return nil
	}
	if k <= 0 || k >= len(workers) {
		all := make([]int, len(queues))
		for i := range all {
			all[i] = i
		}
		return all
	}
	var mine []int
	for i, q := range queues {
		own := score(q, self)
		above := 0
		for _, w := range workers {
			if w != self && outranks(score(q, w), w, own, self) {
				if above++; above == k {
					break
				}
			}
		}
		if above < k {
			mine = append(mine, i)
		}
	}
	return mine
}

// fleetView is the fleet as the worker last saw it.
type fleetView struct {
	self      string
	workers   []string // the live workers' ids, sorted
	saturated []string // those that reported every slot held, sorted
	// known is false while this worker is not known to be in the
	// registry: before its first heartbeat reached it, or since its
	// latest failed.
	known bool
}

// equal reports whether two views give the same plan.
func (v fleetView) equal(o fleetView) bool {
	return v.self == o.self && v.known == o.known &&
		slices.Equal(v.workers, o.workers) && slices.Equal(v.saturated, o.saturated)
}

// watchPlan is the live queues a worker watches.
type watchPlan struct {
	queues []int // indexes into the live queues, in order
	// fallback is set when the worker watches every queue because it
	// does not know its place in the fleet.
	fallback bool
}

// planWatch decides which of the live queues the worker of view v
// watches, k watchers per queue (0: every worker watches every queue,
// whatever the fleet).
//
//   - A worker that is not in the registry (not reached yet, or
//     unreachable for as long as the others take to drop it) watches
//     every queue: it cannot tell which are its share, and a queue nobody
//     watches would wait without bound, while a queue watched twice costs
//     only empty receives. Availability first.
//   - Each queue is watched by its k highest-ranked workers, and, while
//     some of them are saturated (every slot held a message since their
//     previous heartbeat), also by the highest-ranked workers that are
//     not, until k of its watchers are free: a message on a queue whose
//     watchers are all busy is received by a worker that can start it.
//     A saturated worker keeps its own queues, so that its loops go on
//     as soon as a slot frees.
func planWatch(queues []string, v fleetView, k int) watchPlan {
	if k <= 0 {
		return watchPlan{queues: assign(queues, []string{v.self}, v.self, 1)}
	}
	if !v.known || !slices.Contains(v.workers, v.self) {
		return watchPlan{queues: assign(queues, []string{v.self}, v.self, 1), fallback: true}
	}
	mine := assign(queues, v.workers, v.self, k)
	if len(v.saturated) == 0 || slices.Contains(v.saturated, v.self) {
		return watchPlan{queues: mine}
	}
	free := slices.DeleteFunc(slices.Clone(v.workers), func(w string) bool {
		_, found := slices.BinarySearch(v.saturated, w)
		return found
	})
	helping := assign(queues, free, v.self, k)
	merged := slices.Concat(mine, helping)
	slices.Sort(merged)
	return watchPlan{queues: slices.Compact(merged)}
}
