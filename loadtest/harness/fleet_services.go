package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/testenv"
)

// StartLocalCluster starts a Redis Cluster of masters masters and no
// replicas on free loopback ports (redis-server --cluster-enabled yes, one
// process per master, joined by redis-cli --cluster create), for fleet
// runs on redis.mode cluster. Its addresses are in Services.RedisCluster,
// its logs and node files under dir. Stop it with Stop.
func StartLocalCluster(ctx context.Context, dir string, masters int) (*LocalServices, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (Debian: apt-get install redis-server): %w", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli is not on PATH (Debian: apt-get install redis-tools): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &LocalServices{}
	for range masters {
		addr, err := s.startClusterNode(ctx, bin, dir)
		if err != nil {
			s.Stop(context.WithoutCancel(ctx))
			return nil, err
		}
		s.RedisCluster = append(s.RedisCluster, addr)
	}
	args := append(append([]string{"--cluster", "create"}, s.RedisCluster...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := s.waitClusterOK(ctx); err != nil {
		s.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return s, nil
}

// WithCluster returns the services of s with the Redis Cluster of
// cluster (StartLocalCluster) in place of s's Redis.
func (s *LocalServices) WithCluster(cluster *LocalServices) Services {
	return Services{SQSEndpoint: s.SQSEndpoint, RedisCluster: cluster.RedisCluster,
		PIDs: map[string][]int{roleSQS: s.PIDs[roleSQS], roleRedis: cluster.PIDs[roleRedis]}}
}

// startClusterNode starts one cluster-enabled redis-server on a port whose
// cluster bus port (port + 10000) is free too, and waits for its PING.
func (s *LocalServices) startClusterNode(ctx context.Context, bin, dir string) (string, error) {
	port, err := testenv.ClusterPort()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p, err := startProcess("redis-server "+addr, dir, filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"), nil, false, nil, bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
		"--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return "", err
	}
	s.procs = append(s.procs, p)
	s.addPID(roleRedis, p)
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer client.Close()
	if err := waitFor(ctx, p, startTimeout, func(ctx context.Context) error { return client.Ping(ctx).Err() }); err != nil {
		return "", fmt.Errorf("redis-server on %s: %w", addr, err)
	}
	return addr, nil
}

// waitClusterOK waits until every node says cluster_state:ok: each knows
// the others and every slot is served.
func (s *LocalServices) waitClusterOK(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var last error
		for _, addr := range s.RedisCluster {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			info, err := c.ClusterInfo(ctx).Result()
			c.Close()
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New("cluster_state is not ok")
			}
			if err != nil {
				last = fmt.Errorf("%s: %w", addr, err)
				break
			}
		}
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster: %w (last check: %v)", ErrNotReady, last)
		case <-tick.C:
		}
	}
}
