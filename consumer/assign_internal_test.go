package consumer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fairq/fairq/queue"
)

// watchersOf returns, for each queue, the workers that watch it, each
// worker asked with assign as every worker does for itself.
func watchersOf(queues, workers []string, k int) [][]string {
	out := make([][]string, len(queues))
	for _, w := range workers {
		for _, i := range assign(queues, workers, w, k) {
			out[i] = append(out[i], w)
		}
	}
	for _, ws := range out {
		slices.Sort(ws)
	}
	return out
}

// ranked is assign written the plain way: sort the workers by weight for
// each queue and take the first k. The tests hold assign to it.
func ranked(queues, workers []string, self string, k int) []int {
	var mine []int
	for i, q := range queues {
		order := slices.Clone(workers)
		slices.SortFunc(order, func(a, b string) int {
			if outranks(score(q, a), a, score(q, b), b) {
				return -1
			}
			return 1
		})
		if k > 0 && k < len(order) {
			order = order[:k]
		}
		if slices.Contains(order, self) {
			mine = append(mine, i)
		}
	}
	return mine
}

// rankedWatchers returns each queue's k highest-ranked workers, sorted:
// what watchersOf gives (TestAssignWatchers holds them equal) in N·W
// weights rather than N·W².
func rankedWatchers(queues, workers []string, k int) [][]string {
	out := make([][]string, len(queues))
	type weighed struct {
		id string
		w  uint64
	}
	order := make([]weighed, len(workers))
	for i, q := range queues {
		for j, id := range workers {
			order[j] = weighed{id, score(q, id)}
		}
		slices.SortFunc(order, func(a, b weighed) int {
			if outranks(a.w, a.id, b.w, b.id) {
				return -1
			}
			return 1
		})
		for _, o := range order[:min(k, len(order))] {
			out[i] = append(out[i], o.id)
		}
		slices.Sort(out[i])
	}
	return out
}

// fleetOf returns n worker ids as NewID makes them: host, pid, suffix.
func fleetOf(r *rand.Rand, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("ip-10-0-%d-%d-%d-%08x", r.IntN(256), r.IntN(256), 1000+r.IntN(60000), r.Uint32())
	}
	return ids
}

func TestAssign(t *testing.T) {
	live := queue.PoolNames("fairq", 8).Live
	four := []string{"worker-a", "worker-b", "worker-c", "worker-d"}
	tests := []struct {
		name    string
		queues  []string
		workers []string
		self    string
		k       int
		want    []int
	}{
		// The weights are xxhash's, which is stable across releases and
		// machines: these are what every worker of every version computes.
		{"four workers, two per queue: a", live, four, "worker-a", 2, []int{0, 1, 4, 7}},
		{"four workers, two per queue: b", live, four, "worker-b", 2, []int{1, 3, 4, 6}},
		{"four workers, two per queue: c", live, four, "worker-c", 2, []int{2, 3, 5, 6}},
		{"four workers, two per queue: d", live, four, "worker-d", 2, []int{0, 2, 5, 7}},
		{"the order of the ids does not matter", live, []string{"worker-d", "worker-b", "worker-a", "worker-c"}, "worker-a", 2, []int{0, 1, 4, 7}},
		{"one per queue", live, four, "worker-a", 1, []int{0, 1, 4, 7}},
		{"k = 0: every queue", live, four, "worker-b", 0, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"k at the fleet's size: every queue", live, four, "worker-b", 4, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"k above the fleet's size: every queue", live, four, "worker-b", 9, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"alone: every queue", live, []string{"worker-a"}, "worker-a", 2, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"not among the workers: none", live, four, "worker-e", 2, nil},
		{"no workers: none", live, nil, "worker-a", 2, nil},
		{"no queues", nil, four, "worker-a", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assign(tt.queues, tt.workers, tt.self, tt.k)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("assign(%d queues, %v, %q, %d) (-want +got):\n%s", len(tt.queues), tt.workers, tt.self, tt.k, diff)
			}
			if ref := ranked(tt.queues, tt.workers, tt.self, tt.k); slices.Contains(tt.workers, tt.self) && !slices.Equal(ref, got) {
				t.Errorf("assign = %v, but ranking the workers gives %v", got, ref)
			}
		})
	}
}

// assignCase is one fleet of the property tests.
type assignCase struct {
	n, w, k int
}

func (c assignCase) String() string { return fmt.Sprintf("N=%d W=%d k=%d", c.n, c.w, c.k) }

func assignCases() []assignCase {
	var cs []assignCase
	for _, n := range []int{1, 8, 64, 256} {
		for _, w := range []int{1, 2, 3, 4, 16, 40} {
			for _, k := range []int{1, 2, 3} {
				cs = append(cs, assignCase{n, w, k})
			}
		}
	}
	return cs
}

// TestAssignWatchers: each queue has exactly min(k, W) watchers, the same
// that ranking the workers by weight gives.
func TestAssignWatchers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range assignCases() {
		live := queue.PoolNames("fairq", c.n).Live
		for range 5 {
			ids := fleetOf(r, c.w)
			byAssign := watchersOf(live, ids, c.k)
			for i, ws := range byAssign {
				if len(ws) != min(c.k, c.w) {
					t.Fatalf("%v: %s has %d watchers %v, want %d", c, live[i], len(ws), ws, min(c.k, c.w))
				}
			}
			if diff := cmp.Diff(rankedWatchers(live, ids, c.k), byAssign); diff != "" {
				t.Fatalf("%v: assign and the ranking disagree (-ranked +assign):\n%s", c, diff)
			}
		}
	}
}

// TestAssignJoinLeave: a worker that joins takes, on each queue it wins,
// the place of one watcher and changes nothing else; a worker that leaves
// gives each of its queues one watcher and changes nothing else. The
// number of queues moved is the one the worker gains or loses, about
// k·N/W.
func TestAssignJoinLeave(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, c := range assignCases() {
		live := queue.PoolNames("fairq", c.n).Live
		moved, expected := 0, 0.0
		for range 20 {
			ids := fleetOf(r, c.w+1)
			before, after := ids[:c.w], ids
			newcomer := ids[c.w]
			// Joining: before → after. Leaving is the same pair read
			// backwards: after → before.
			wb, wa := rankedWatchers(live, before, c.k), rankedWatchers(live, after, c.k)
			for i := range live {
				gained := slices.Contains(wa[i], newcomer)
				kept := slices.DeleteFunc(slices.Clone(wa[i]), func(w string) bool { return w == newcomer })
				lost := diff(wb[i], kept)
				switch {
				case !gained && !slices.Equal(wb[i], wa[i]):
					t.Fatalf("%v: %s changed watchers %v → %v though the newcomer did not win it", c, live[i], wb[i], wa[i])
				case gained && c.w >= c.k && len(lost) != 1:
					t.Fatalf("%v: %s won by the newcomer: watchers %v → %v, want exactly one replaced", c, live[i], wb[i], wa[i])
				case gained && c.w < c.k && len(lost) != 0:
					t.Fatalf("%v: %s: fewer workers than k, yet %v lost their place", c, live[i], lost)
				}
				if gained {
					moved++
				}
			}
			expected += float64(c.n) * float64(min(c.k, c.w+1)) / float64(c.w+1)
		}
		// A binomial count: within 5 standard deviations of k·N/W.
		p := float64(min(c.k, c.w+1)) / float64(c.w+1)
		sd := math.Sqrt(20 * float64(c.n) * p * (1 - p))
		if math.Abs(float64(moved)-expected) > 5*sd+1e-9 {
			t.Errorf("%v: a worker joining or leaving moved %d queues over 20 fleets, want about %.0f (k·N/W each)", c, moved, expected)
		}
	}
}

// diff returns the elements of a not in b.
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestAssignBalance: the number of queues a worker watches is binomial,
// N draws at k/W each: mean k·N/W, standard deviation √(N·k/W·(1−k/W)).
// Over 200 random fleets of each size, no worker's share is further than
// 5 standard deviations from the mean, and the shares' spread is the
// binomial's within 15%. (N=256, W=16, k=2: 32 ± 5.3 queues; the widest
// seen is 16 to 52. With few queues per worker the share is lumpy — at
// N=8, W=16, k=2 a worker watches 0 to 5 queues, 1 on average — which
// costs nothing in requests, and a worker that fills up gets help:
// planWatch.)
func TestAssignBalance(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, c := range []assignCase{{8, 4, 2}, {64, 4, 2}, {64, 16, 2}, {256, 4, 2}, {256, 16, 2}, {256, 16, 1}, {256, 16, 3}, {256, 64, 2}} {
		live := queue.PoolNames("fairq", c.n).Live
		p := float64(c.k) / float64(c.w)
		mean, sd := float64(c.n)*p, math.Sqrt(float64(c.n)*p*(1-p))
		var sum, sumSq float64
		samples := 0
		for range 200 {
			ids := fleetOf(r, c.w)
			share := map[string]int{}
			for _, ws := range rankedWatchers(live, ids, c.k) {
				for _, w := range ws {
					share[w]++
				}
			}
			for _, id := range ids {
				got := float64(share[id])
				if math.Abs(got-mean) > 5*sd {
					t.Errorf("%v: a worker watches %v queues, want %.1f ± %.1f (5 sd)", c, got, mean, 5*sd)
				}
				sum += got
				sumSq += got * got
				samples++
			}
		}
		m := sum / float64(samples)
		variance := sumSq/float64(samples) - m*m
		if math.Abs(m-mean) > 1e-9 {
			t.Errorf("%v: mean share %v, want exactly k·N/W = %v", c, m, mean)
		}
		if ratio := variance / (sd * sd); ratio < 0.85 || ratio > 1.15 {
			t.Errorf("%v: shares vary %.2f× as much as a binomial's, want 0.85–1.15", c, ratio)
		}
	}
}

func TestPlanWatch(t *testing.T) {
	live := queue.PoolNames("fairq", 8).Live
	four := []string{"worker-a", "worker-b", "worker-c", "worker-d"}
	every := []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name string
		view fleetView
		k    int
		want watchPlan
	}{
		{
			name: "in the fleet: its share",
			view: fleetView{self: "worker-a", workers: four, known: true},
			k:    2, want: watchPlan{queues: []int{0, 1, 4, 7}},
		},
		{
			name: "not in the registry: every queue",
			view: fleetView{self: "worker-a", workers: four},
			k:    2, want: watchPlan{queues: every, fallback: true},
		},
		{
			name: "registered, but not among the workers read: every queue",
			view: fleetView{self: "worker-e", workers: four, known: true},
			k:    2, want: watchPlan{queues: every, fallback: true},
		},
		{
			name: "k = 0: every queue",
			view: fleetView{self: "worker-a", workers: four, known: true},
			k:    0, want: watchPlan{queues: every},
		},
		{
			name: "k = 0, not in the registry: every queue, as ever",
			view: fleetView{self: "worker-a"},
			k:    0, want: watchPlan{queues: every},
		},
		{
			// c watches 2, 3, 5 and 6; of the free workers a, b and d,
			// a ranks in the first two on 2 and 3.
			name: "a watcher saturated: a free worker helps on its queues",
			view: fleetView{self: "worker-a", workers: four, saturated: []string{"worker-c"}, known: true},
			k:    2, want: watchPlan{queues: []int{0, 1, 2, 3, 4, 7}},
		},
		{
			name: "saturated itself: its share only",
			view: fleetView{self: "worker-c", workers: four, saturated: []string{"worker-c"}, known: true},
			k:    2, want: watchPlan{queues: []int{2, 3, 5, 6}},
		},
		{
			name: "every other worker saturated: every queue",
			view: fleetView{self: "worker-a", workers: four, saturated: []string{"worker-b", "worker-c", "worker-d"}, known: true},
			k:    2, want: watchPlan{queues: every},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planWatch(live, tt.view, tt.k)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(watchPlan{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("planWatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanWatchFreeWatchers: whichever workers are saturated, each queue
// keeps its k watchers and has min(k, free workers) watchers that are not
// saturated.
func TestPlanWatchFreeWatchers(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	live := queue.PoolNames("fairq", 64).Live
	for _, k := range []int{1, 2, 3} {
		for range 50 {
			ids := fleetOf(r, 2+r.IntN(12))
			var saturated []string
			for _, id := range ids {
				if r.IntN(3) == 0 {
					saturated = append(saturated, id)
				}
			}
			slices.Sort(ids)
			slices.Sort(saturated)
			free := min(k, len(ids)-len(saturated))
			watchers := make([][]string, len(live))
			for _, id := range ids {
				for _, i := range planWatch(live, fleetView{self: id, workers: ids, saturated: saturated, known: true}, k).queues {
					watchers[i] = append(watchers[i], id)
				}
			}
			base := watchersOf(live, ids, k)
			for i, ws := range watchers {
				if d := diff(base[i], ws); len(d) > 0 {
					t.Fatalf("k=%d: %s lost its watchers %v", k, live[i], d)
				}
				if got := len(diff(ws, saturated)); got < free {
					t.Fatalf("k=%d, %d of %d workers saturated: %s has %d free watchers, want %d", k, len(saturated), len(ids), live[i], got, free)
				}
			}
		}
	}
}
