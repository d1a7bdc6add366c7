package gateway

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// statsFlushEvery is how often counts are added to Redis.
const statsFlushEvery = time.Second

// stats counts each tenant's admitted and rejected messages for GET
// /v1/tenant: in this process, and, with Redis, for the fleet: this
// process's counts are added to a hash per tenant every second, and a read
// is that hash plus what is not flushed yet.
type stats struct {
	redis  redis.UniversalClient // nil: this process only
	prefix string
	log    *slog.Logger

	tenants sync.Map   // tenant id → *tenantStats
	mu      sync.Mutex // orders flushes and reads of the flushed counts
}

type tenantStats struct {
	admitted, rejected     atomic.Int64 // since start
	flushedAdm, flushedRej int64        // of those, added to Redis; guarded by stats.mu
}

func (st *stats) of(tenant string) *tenantStats {
	if ts, ok := st.tenants.Load(tenant); ok {
		return ts.(*tenantStats)
	}
	ts, _ := st.tenants.LoadOrStore(tenant, &tenantStats{})
	return ts.(*tenantStats)
}

func (st *stats) admitted(tenant string, n int64) { st.of(tenant).admitted.Add(n) }
func (st *stats) rejected(tenant string, n int64) { st.of(tenant).rejected.Add(n) }

// get returns a tenant's counts.
func (st *stats) get(ctx context.Context, tenant string) (admitted, rejected int64, err error) {
	ts := st.of(tenant)
	if st.redis == nil {
		return ts.admitted.Load(), ts.rejected.Load(), nil
	}
	st.mu.Lock()
	pendAdm := ts.admitted.Load() - ts.flushedAdm
	pendRej := ts.rejected.Load() - ts.flushedRej
	v, err := st.redis.HMGet(ctx, statsKey(st.prefix, tenant), "admitted", "rejected").Result()
	st.mu.Unlock()
	if err != nil {
		return ts.admitted.Load(), ts.rejected.Load(), err
	}
	return num(v[0]) + pendAdm, num(v[1]) + pendRej, nil
}

func num(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// flush adds what was counted since the last flush to Redis.
func (st *stats) flush(ctx context.Context) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	type delta struct {
		ts       *tenantStats
		adm, rej int64
	}
	var deltas []delta
	pipe := st.redis.Pipeline()
	st.tenants.Range(func(id, v any) bool {
		ts := v.(*tenantStats)
		adm, rej := ts.admitted.Load(), ts.rejected.Load()
		d := delta{ts, adm - ts.flushedAdm, rej - ts.flushedRej}
		if d.adm == 0 && d.rej == 0 {
			return true
		}
		key := statsKey(st.prefix, id.(string))
		pipe.HIncrBy(ctx, key, "admitted", d.adm)
		pipe.HIncrBy(ctx, key, "rejected", d.rej)
		deltas = append(deltas, d)
		return true
	})
	if len(deltas) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for _, d := range deltas {
		d.ts.flushedAdm += d.adm
		d.ts.flushedRej += d.rej
	}
	return nil
}

// run flushes every statsFlushEvery until ctx ends, then once more.
func (st *stats) run(ctx context.Context) {
	t := time.NewTicker(statsFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			if err := st.flush(fctx); err != nil {
				st.log.LogAttrs(ctx, slog.LevelDebug, "tenant counts not flushed to redis at stop", slog.Any("err", err))
			}
			cancel()
			return
		case <-t.C:
		}
		if err := st.flush(ctx); err != nil && ctx.Err() == nil {
			st.log.LogAttrs(ctx, slog.LevelDebug, "tenant counts not flushed to redis", slog.Any("err", err))
		}
	}
}
