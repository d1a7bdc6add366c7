package keyslot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/keyslot"
	"github.com/fairq/fairq/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestSlot holds Slot to the examples of the Redis Cluster specification.
func TestSlot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want int
	}{
		{"123456789", 0x31C3 % keyslot.Slots}, // the specification's CRC16 check value
		{"foo", 12182},
		{"bar", 5061},
		{"", 0},
		{"{user1000}.following", keyslot.Slot("user1000")},
		{"{user1000}.followers", keyslot.Slot("user1000")},
		{"foo{}{bar}", keyslot.Slot("foo{}{bar}")}, // an empty tag: the whole key
		{"foo{{bar}}zap", keyslot.Slot("{bar")},    // the tag ends at the first '}'
		{"foo{bar}{zap}", keyslot.Slot("bar")},     // only the first tag counts
		{"foo{bar", keyslot.Slot("foo{bar")},       // no '}': the whole key
	}
	for _, tt := range tests {
		if got := keyslot.Slot(tt.key); got != tt.want {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

// TestSlotAgreesWithRedis asks a Redis Cluster node for the slot of keys
// of every shape the packages build, and of the specification's tricky
// ones.
func TestSlotAgreesWithRedis(t *testing.T) {
	t.Parallel()
	addrs := testenv.RedisCluster(t)
	c := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer c.Close()
	keys := []string{"", "a", "fairq:tenants", "{fairq:tenants}:rev", "{fairq:backlog}:tenant:acme",
		"sem:fairq:concurrency:acme", "rate:fairq:process:acme", "fairq:{overview}:reports",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{}", "}{", "{a}{b}", "é{ü}"}
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("t%08x:%d", i*2654435761, i))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(context.Background(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := keyslot.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	if err := keyslot.Check(map[string][]string{
		"one tag":  {"{p:x}:a", "{p:x}:b", "p:x"},
		"one key":  {"p:y"},
		"tag only": {"{p:z}"},
	}); err != nil {
		t.Errorf("groups in one slot each: %v", err)
	}
	// The negative control: groups that mix slots are each reported, by
	// name, with their keys' slots.
	err := keyslot.Check(map[string][]string{
		"fine":     {"{p}:a", "{p}:b"},
		"mixed":    {"p:tenants", "p:tenants:rev"},
		"half tag": {"{p:t}:a", "p:t:b", "{p:t}:c"},
		"empty":    {},
	})
	if err == nil {
		t.Fatal("Check passed groups that mix slots")
	}
	for _, want := range []string{
		"group mixed spans several slots", fmt.Sprintf(`"p:tenants" in %d`, keyslot.Slot("p:tenants")),
		"group half tag spans several slots", "group empty has no keys",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check's error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "fine") {
		t.Errorf("Check reported a group in one slot:\n%v", err)
	}
}
