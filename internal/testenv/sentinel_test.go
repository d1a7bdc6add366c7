package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisSentinel: a client of the Sentinels finds the primary, follows
// it when the primary is killed and the replica promoted, and again when
// the old primary, back as a replica, is promoted on request (SENTINEL
// FAILOVER); the key written before both is still there.
func TestRedisSentinel(t *testing.T) {
	s := NewRedisSentinel(t)
	if n := len(s.Addrs()); n != 3 {
		t.Fatalf("%d sentinels, want 3: %v", n, s.Addrs())
	}
	ctx := context.Background()
	client := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: SentinelMaster, SentinelAddrs: s.Addrs(),
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: 1,
	})
	defer client.Close()
	key := Prefix(t)
	if err := client.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.Do(ctx, "WAIT", 1, 1000).Err(); err != nil { // the replica has the key
		t.Fatal(err)
	}
	first := s.Primary(t)

	s.Kill(t, first)
	killed := time.Now()
	if err := client.Get(ctx, key).Err(); err == nil {
		t.Fatal("GET answered with the primary killed and no replica promoted yet")
	}
	second := s.WaitPromoted(t, first, 15*time.Second)
	promoted := time.Since(killed)
	waitGet(t, client, key, 5*time.Second)
	t.Logf("killed %s: %s promoted after %v, the client answered after %v", first, second, promoted.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if promoted < SentinelDownAfter {
		t.Errorf("promoted %v after the kill, sooner than down-after-milliseconds (%v)", promoted, SentinelDownAfter)
	}

	s.Restart(t, first)
	s.Failover(t)
	if third := s.WaitPromoted(t, second, 15*time.Second); third != first {
		t.Fatalf("SENTINEL FAILOVER promoted %s, want the only replica %s", third, first)
	}
	waitGet(t, client, key, 5*time.Second)
	if err := client.Set(ctx, key, "w", time.Minute).Err(); err != nil {
		t.Fatalf("SET on the primary after the switch: %v", err)
	}
}

// waitGet waits until GET key through client answers "v".
func waitGet(t *testing.T, client *redis.Client, key string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v, err := client.Get(context.Background(), key).Result()
		if err == nil && v == "v" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET through the sentinels after the failover: %q, %v", v, err)
		}
		time.Sleep(50 * time.Millisecond) // the client learns the new primary
	}
}

func TestStartSentinelMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s, err := startSentinel()
	if s != nil {
		s.stop()
	}
	var missing *missingError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "redis-server") || !strings.Contains(err.Error(), "make test") {
		t.Errorf("start with an empty PATH: err = %v, want a missingError naming redis-server and `make test`", err)
	}
}
