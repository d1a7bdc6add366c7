package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster returns the addresses of the three masters of a Redis
// Cluster on 127.0.0.1 (redis-server --cluster-enabled yes, joined by
// redis-cli --cluster create), started on first use for the whole test
// binary. It has no replicas and keeps nothing on disk past the binary.
// Tests share it: prefix every key with Prefix(t); keys that a script
// touches together must share a hash tag, as in production.
func RedisCluster(t testing.TB) []string {
	t.Helper()
	return strings.Split(clusterService.get(t), ",")
}

var clusterService = &service{name: "redis cluster", start: func() (string, stopper, error) {
	c, err := startCluster(3, 0)
	if err != nil {
		return "", nil, err
	}
	return strings.Join(c.Masters(), ","), c, nil
}}

// Cluster is a Redis Cluster of its own, for a test that takes nodes away.
type Cluster struct {
	dir string

	mu      sync.Mutex
	nodes   map[string]*process // by address, the killed ones removed
	masters []string            // as created
	killed  []string
}

// NewRedisCluster starts a Redis Cluster of masters masters, each with
// replicas replicas, on 127.0.0.1, stopped when the test ends. It skips or
// fails t as RedisAddr does when redis-server or redis-cli is missing.
func NewRedisCluster(t testing.TB, masters, replicas int) *Cluster {
	t.Helper()
	c, err := startCluster(masters, replicas)
	if err != nil {
		skipOrFail(t, "redis cluster", err)
	}
	t.Cleanup(c.stop)
	return c
}

// Masters returns the addresses of the masters as the cluster was created.
func (c *Cluster) Masters() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.masters...)
}

// Addrs returns the addresses of the nodes still running.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.nodes))
	for a := range c.nodes {
		out = append(out, a)
	}
	return out
}

// Kill kills the node at addr at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(t testing.TB, addr string) {
	t.Helper()
	c.mu.Lock()
	p := c.nodes[addr]
	delete(c.nodes, addr)
	c.killed = append(c.killed, addr)
	c.mu.Unlock()
	if p == nil {
		t.Fatalf("testenv: no running cluster node at %s", addr)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// WaitHealthy waits until every running node has marked the killed nodes
// failed and reports the cluster ok, every slot served: a replica took
// over each dead master's slots.
func (c *Cluster) WaitHealthy(t testing.TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	c.mu.Lock()
	killed := append([]string(nil), c.killed...)
	c.mu.Unlock()
	for _, a := range c.Addrs() {
		for _, k := range killed {
			for {
				nodes, err := nodeCommand(a, "CLUSTER", "NODES")
				if err == nil && nodeFailed(nodes, k) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("testenv: %s does not see %s failed within %v (%v):\n%s", a, k, within, err, nodes)
				}
				time.Sleep(100 * time.Millisecond) // polling another process
			}
		}
	}
	if err := waitClusterOK(c.Addrs(), deadline); err != nil {
		nodes, _ := nodeCommand(c.Addrs()[0], "CLUSTER", "NODES")
		t.Fatalf("testenv: %v; the cluster's nodes:\n%s", err, nodes)
	}
}

// nodeFailed reports whether CLUSTER NODES output flags the node at addr
// as failed.
func nodeFailed(nodes, addr string) bool {
	for _, l := range strings.Split(nodes, "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && strings.HasPrefix(f[1], addr+"@") {
			return strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?")
		}
	}
	return false
}

func (c *Cluster) stop() {
	c.mu.Lock()
	nodes := c.nodes
	c.nodes = nil
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range nodes {
		wg.Go(p.stop)
	}
	wg.Wait()
	os.RemoveAll(c.dir)
}

// ClusterNodeTimeout is the nodes' cluster-node-timeout: how long a master
// may not answer before its replica takes over.
const ClusterNodeTimeout = 2 * time.Second

// startCluster starts masters×(1+replicas) nodes and joins them.
func startCluster(masters, replicas int) (*Cluster, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, &missingError{what: "redis-server is not on PATH", how: "install it (Debian: apt-get install redis-server) or run `make test`, which installs it"}
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, &missingError{what: "redis-cli is not on PATH", how: "install it (Debian: apt-get install redis-tools, which redis-server pulls in)"}
	}
	dir, err := os.MkdirTemp("", "fairq-redis-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, nodes: map[string]*process{}}
	deadline := time.Now().Add(startTimeout)
	var addrs []string
	for range masters * (1 + replicas) {
		addr, p, err := startClusterNode(bin, dir, deadline)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.nodes[addr] = p
		addrs = append(addrs, addr)
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	if err := waitClusterOK(addrs, deadline); err != nil {
		c.stop()
		return nil, err
	}
	// redis-cli gives the first nodes the slots and makes the rest their
	// replicas; ask, rather than rely on it, and wait for every replica's
	// first sync.
	for _, a := range addrs {
		for {
			info, err := nodeCommand(a, "INFO", "replication")
			if err != nil {
				c.stop()
				return nil, err
			}
			if strings.Contains(info, "role:master") {
				c.masters = append(c.masters, a)
				break
			}
			if strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("replica %s not in sync within %v:\n%s", a, startTimeout, info)
			}
			time.Sleep(50 * time.Millisecond) // polling another process
		}
	}
	return c, nil
}

// startClusterNode starts one cluster-enabled redis-server on a port whose
// cluster bus port (port + 10000) is free too.
func startClusterNode(bin, dir string, deadline time.Time) (string, *process, error) {
	for try := 1; ; try++ {
		port, err := ClusterPort()
		if err != nil {
			return "", nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := startProcess("redis-server "+addr, dir, nil, false, bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
			"--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
			// A replica syncs at once (no wait for more replicas) and may
			// always take over: a test kills a master soon after the start.
			"--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0",
			// CLUSTER SLOTS lists a replica once its replication offset is
			// past 0: at the first write or the master's first ping, 10 s
			// after the start by default.
			"--repl-ping-replica-period", "1",
			"--save", "", "--appendonly", "no", "--dir", dir)
		if err != nil {
			return "", nil, err
		}
		err = waitRedis(addr, p, deadline)
		if err == nil {
			return addr, p, nil
		}
		p.stop()
		if try < redisPortTries && p.out.contains("Address already in use") {
			continue
		}
		return "", nil, err
	}
}

// ClusterPort returns a free port below 55536 whose port + 10000 is free
// too, for a Redis Cluster node and its cluster bus.
func ClusterPort() (int, error) {
	for range 50 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("no free port pair for a cluster node")
}

// waitClusterOK waits until every node at addrs says cluster_state:ok.
func waitClusterOK(addrs []string, deadline time.Time) error {
	var last error
	for time.Now().Before(deadline) {
		last = nil
		for _, a := range addrs {
			info, err := nodeCommand(a, "CLUSTER", "INFO")
			if err == nil && !strings.Contains(info, "cluster_state:ok") {
				err = errors.New("cluster_state is not ok")
			}
			if err != nil {
				last = fmt.Errorf("%s: %w", a, err)
				break
			}
		}
		if last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // polling another process
	}
	return fmt.Errorf("redis cluster not ok within %v: %v", startTimeout, last)
}

// nodeCommand sends one command to one node (not through the cluster).
func nodeCommand(addr string, args ...any) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Text()
}
