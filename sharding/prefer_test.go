package sharding

import "testing"

func TestPickPreferring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		depth2, depth5 int          // of the shard's queues 2 and 5
		prefer         map[int]bool // the queues prefer accepts
		want           int
	}{
		{"nothing preferred: the shallowest", 0, 5, nil, 2},
		{"the shallowest preferred", 0, 5, map[int]bool{2: true}, 2},
		{"a deeper queue within the slack", 0, PreferSlack, map[int]bool{5: true}, 5},
		{"a deeper queue past the slack", 0, PreferSlack + 1, map[int]bool{5: true}, 2},
		{"a queue outside the shard", 0, 5, map[int]bool{3: true}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr, r, _ := setup(t, 8, 2, Config{})
			tenant := tenantWithShard(t, tr.Pool(), 2, 5)
			r.set("test-live-02", tt.depth2)
			r.set("test-live-05", tt.depth5)
			if err := tr.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			var asked []int
			got := tr.PickPreferring(tenant, func(q int) bool {
				asked = append(asked, q)
				return tt.prefer[q]
			})
			if got != tt.want {
				t.Errorf("PickPreferring = %d (asked about %v), want %d", got, asked, tt.want)
			}
			wantDepth := map[int]int{2: tt.depth2, 5: tt.depth5}[got] + 1
			if d, _ := tr.Estimate(got); d != int64(wantDepth) {
				t.Errorf("Estimate(%d) = %d after the pick, want %d: the pick counts on its queue", got, d, wantDepth)
			}
		})
	}
}

// TestPickPreferringStale: without a fresh reading the depths say nothing,
// and the pick is Pick's, at random within the shard.
func TestPickPreferringStale(t *testing.T) {
	t.Parallel()
	tr, _, _ := setup(t, 8, 2, Config{})
	tenant := tenantWithShard(t, tr.Pool(), 1, 6)
	counts := map[int]int{}
	for range 2000 {
		counts[tr.PickPreferring(tenant, func(q int) bool { return q == 6 })]++
	}
	// Binomial(2000, 1/2): 850–1150 is ±6.7 sd.
	if len(counts) != 2 || counts[1] < 850 || counts[6] < 850 {
		t.Errorf("picks by queue = %v, want about 1000 on each of 1 and 6", counts)
	}
}
