package spillover

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/internal/keyslot"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// TestTenantKeysShareASlot: the keys one Redis script takes a message's
// slots and tokens in (throttle.RedisAdmitter) live in one hash slot of a
// Redis Cluster, for any tenant a message may carry; RedisKeys names the
// keys Admit asks for.
func TestTenantKeysShareASlot(t *testing.T) {
	t.Parallel()
	// A worker's prefix is its queue prefix and a colon: letters, digits,
	// '-' and '_', as SQS allows in a queue name.
	for _, prefix := range []string{"fairq:", "", "team-a_1:"} {
		groups := map[string][]string{}
		for _, id := range []string{"acme", "a.b-c_D9", "", "{acme}", "a}b{c", "not a tenant", "{"} {
			y := yielding{on: true, concurrency: 1, rate: throttle.Limit{Rate: 1}}
			lim := tenant.Resolved{ProcessRate: 2, Concurrency: 2}
			bs, n := rateBuckets(id, y, lim)
			need := admitNeed(id, lim, y, bs[:n])
			if len(need.Slots) != 2 || len(need.Tokens) != 2 {
				t.Fatalf("tenant %q: %d slots and %d buckets, want the tenant's and old work's of each", id, len(need.Slots), len(need.Tokens))
			}
			asked := throttle.RedisAdmitKeys(prefix, prefix, need)
			if diff := cmp.Diff(slices.Sorted(slices.Values(RedisKeys(prefix, id))), slices.Sorted(slices.Values(asked))); diff != "" {
				t.Errorf("tenant %q: RedisKeys differs from the keys asked for (-RedisKeys +asked):\n%s", id, diff)
			}
			groups["limits of "+id] = asked
		}
		if err := keyslot.Check(groups); err != nil {
			t.Errorf("prefix %q: %v", prefix, err)
		}
	}
}

// TestBacklogLineOf: a tenant's semaphore leads to its old work's, for
// any tenant; no other key leads anywhere.
func TestBacklogLineOf(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"acme", "", "a}b{c"} {
		if got, ok := backlogLineOf(concurrencyKey(id)); !ok || got != backlogConcurrencyKey(id) {
			t.Errorf("tenant %q: %q, %v; want %q", id, got, ok, backlogConcurrencyKey(id))
		}
	}
	for _, key := range []string{processKey("acme"), backlogConcurrencyKey("acme"), "concurrency"} {
		if got, ok := backlogLineOf(key); ok {
			t.Errorf("%q leads to %q", key, got)
		}
	}
}
