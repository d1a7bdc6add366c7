package testenv

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisTopology is a way a deployment reaches Redis, with the shared test
// service that plays it.
type RedisTopology struct {
	// Name is "single" or "cluster", for t.Run.
	Name string
	// Client returns a new client of the service, closed when t ends; it
	// skips or fails t as RedisAddr and RedisCluster do.
	Client func(t testing.TB) redis.UniversalClient
}

// RedisTopologies returns one redis-server (RedisAddr) and the shared
// three-master Redis Cluster (RedisCluster), in that order. A package
// runs its Redis tests against each, so that a script or transaction
// whose keys span several hash slots fails there as it would in
// production (CROSSSLOT).
func RedisTopologies() []RedisTopology {
	return []RedisTopology{
		{Name: "single", Client: func(t testing.TB) redis.UniversalClient {
			t.Helper()
			c := redis.NewClient(&redis.Options{Addr: RedisAddr(t)})
			t.Cleanup(func() { c.Close() })
			return c
		}},
		{Name: "cluster", Client: func(t testing.TB) redis.UniversalClient {
			t.Helper()
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: RedisCluster(t)})
			t.Cleanup(func() { c.Close() })
			return c
		}},
	}
}
