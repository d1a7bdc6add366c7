package gateway

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

type firstPicker struct{}

func (firstPicker) Pick(string) int { return 0 }
func (firstPicker) Sent(int, int)   {}

// BenchmarkAdmit is admission alone: the backlog read and the token taken,
// in process and on Redis (one round trip for the GCRA; the backlog read
// is mostly served from its 100 ms cache).
func BenchmarkAdmit(b *testing.B) {
	rate, burst := 1e12, 1<<40
	reg, err := tenant.New(tenant.Config{Tenants: []tenant.Spec{{ID: "acme", Limits: tenant.Limits{IngestRate: &rate, IngestBurst: &burst}}}})
	if err != nil {
		b.Fatal(err)
	}
	t, _ := reg.Get("acme")
	newServer := func(lim Limiter, bl Backlog) *Server {
		s, err := New(Config{Backend: queue.NewMemory(queue.MemoryConfig{}), Names: queue.PoolNames("b", 1),
			Picker: firstPicker{}, Tenants: reg, Limiter: lim, Backlog: bl})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	trackerOf := func(c *backlog.Counter) *backlog.Tracker {
		tr, err := backlog.NewTracker(backlog.TrackerConfig{Counter: c})
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	memBacklog, _ := backlog.New(backlog.Config{})
	b.Run("local", func(b *testing.B) {
		s := newServer(throttle.NewLocalLimiter(throttle.LocalConfig{}), trackerOf(memBacklog))
		benchAdmit(b, s, t)
	})
	b.Run("redis", func(b *testing.B) {
		client := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b)})
		b.Cleanup(func() { client.Close() })
		prefix := testenv.Prefix(b) + ":"
		rl, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: client, Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		bl, err := backlog.New(backlog.Config{Redis: client, Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		benchAdmit(b, newServer(rl, trackerOf(bl)), t)
	})
}

func benchAdmit(b *testing.B, s *Server, t tenant.Tenant) {
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if d, _, err := s.admit(ctx, t, 1); err != nil || d.Allowed != 1 {
				b.Errorf("admit: %+v, %v", d, err)
				return
			}
		}
	})
}
