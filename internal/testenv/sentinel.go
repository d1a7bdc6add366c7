package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which the Sentinels of NewRedisSentinel
// watch their primary: redis.master_name.
const SentinelMaster = "fairq"

// The Sentinels' timing, short so that a failover takes a few seconds
// rather than the better part of a minute (down-after-milliseconds is 30 s
// by default).
const (
	// SentinelDownAfter is their down-after-milliseconds: how long the
	// primary may not answer before a Sentinel holds it down and, with a
	// second agreeing, they elect one of them to promote the replica. No
	// promotion can happen sooner.
	//
	// Not 1 s: a Sentinel that starts watching a primary, at its start or
	// after a failover, counts the primary's silence from then but sends
	// its first PING a second later (its PING period), and at 1 s the
	// answer may come too late: the Sentinels then fail over the primary
	// they have just promoted.
	SentinelDownAfter = 2 * time.Second
	// sentinelFailoverTimeout is their failover-timeout: a failover not
	// done within it is given up, and the Sentinel that led it waits
	// twice as long before it leads another of the same primary.
	sentinelFailoverTimeout = 3 * time.Second
	// sentinelQuorum Sentinels of the three must hold the primary down.
	sentinelQuorum = 2
	sentinelCount  = 3
)

// Sentinel is a Redis primary with one replica, watched by three Redis
// Sentinels, all on 127.0.0.1 and of its own: a deployment of
// redis.mode sentinel, for a test that fails the primary over.
type Sentinel struct {
	bin, dir string

	mu        sync.Mutex
	nodes     map[string]*process // primary and replicas by address, the killed ones removed
	sentinels map[string]*process // by address
	addrs     []string            // the Sentinels' addresses, as started
}

// NewRedisSentinel starts a primary, its replica (replicaof) and three
// Sentinels (redis-server --sentinel) that watch it under the name
// SentinelMaster, stopped when the test ends. It returns once the replica
// is in sync and every Sentinel knows the replica and the two other
// Sentinels, so that a failover can start at once. It skips or fails t as
// RedisAddr does when redis-server is missing.
func NewRedisSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s, err := startSentinel()
	if err != nil {
		skipOrFail(t, "redis sentinel", err)
	}
	t.Cleanup(s.stop)
	return s
}

// Addrs returns the Sentinels' addresses: redis.addrs.
func (s *Sentinel) Addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.addrs)
}

// Primary returns the address of the primary as the Sentinels name it,
// failing t when they do not all name the same one.
func (s *Sentinel) Primary(t testing.TB) string {
	t.Helper()
	addr, err := s.agreedPrimary()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return addr
}

// agreedPrimary asks every Sentinel for the primary's address.
func (s *Sentinel) agreedPrimary() (string, error) {
	var first string
	for i, a := range s.Addrs() {
		got, err := sentinelPrimary(a)
		if err != nil {
			return "", fmt.Errorf("sentinel %s: %w", a, err)
		}
		if i == 0 {
			first = got
		} else if got != first {
			return "", fmt.Errorf("the sentinels disagree on the primary: %s names %s, %s names %s", s.addrs[0], first, a, got)
		}
	}
	return first, nil
}

// Kill kills the Redis node at addr at once (SIGKILL), as a crash would.
func (s *Sentinel) Kill(t testing.TB, addr string) {
	t.Helper()
	s.mu.Lock()
	p := s.nodes[addr]
	delete(s.nodes, addr)
	s.mu.Unlock()
	if p == nil {
		t.Fatalf("testenv: no running redis node at %s", addr)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Failover asks a Sentinel to fail the primary over now, while it is up
// (SENTINEL FAILOVER): the planned switch of a maintenance.
func (s *Sentinel) Failover(t testing.TB) {
	t.Helper()
	c := sentinelClient(s.Addrs()[0])
	defer c.Close()
	if err := c.Failover(context.Background(), SentinelMaster).Err(); err != nil {
		t.Fatalf("testenv: SENTINEL FAILOVER: %v", err)
	}
}

// WaitPromoted waits until every Sentinel names a primary other than old
// and that node says it is a primary, and returns its address.
func (s *Sentinel) WaitPromoted(t testing.TB, old string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		addr, err := s.agreedPrimary()
		if err == nil && addr == old {
			err = fmt.Errorf("the sentinels still name %s", old)
		}
		if err == nil {
			var info string
			info, err = nodeCommand(addr, "INFO", "replication")
			if err == nil && !strings.Contains(info, "role:master") {
				err = fmt.Errorf("%s is named the primary but is not one yet", addr)
			}
		}
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: no replica of %s promoted within %v: %v", old, within, err)
		}
		time.Sleep(50 * time.Millisecond) // polling other processes
	}
}

// Restart starts the killed node at addr again, as a replica of the
// current primary (as an operator brings a failed primary back), and
// waits until it is in sync and the Sentinels count it: the primary has a
// replica to be failed over to again.
func (s *Sentinel) Restart(t testing.TB, addr string) {
	t.Helper()
	primary := s.Primary(t)
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("testenv: restart %q: not a node's address", addr)
	}
	s.mu.Lock()
	_, running := s.nodes[addr]
	s.mu.Unlock()
	if running {
		t.Fatalf("testenv: restart %s: still running", addr)
	}
	deadline := time.Now().Add(startTimeout)
	p, err := s.startNode(port, primary, deadline)
	if err != nil {
		t.Fatalf("testenv: restart %s: %v", addr, err)
	}
	s.mu.Lock()
	s.nodes[addr] = p
	s.mu.Unlock()
	if err := waitInSync(addr, deadline); err != nil {
		t.Fatalf("testenv: restart %s: %v", addr, err)
	}
	if err := s.waitWatched(primary, deadline); err != nil {
		t.Fatalf("testenv: restart %s: %v", addr, err)
	}
}

// startSentinel starts the primary, the replica and the Sentinels.
func startSentinel() (*Sentinel, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, &missingError{what: "redis-server is not on PATH", how: "install it (Debian: apt-get install redis-server) or run `make test`, which installs it"}
	}
	dir, err := os.MkdirTemp("", "fairq-redis-sentinel-")
	if err != nil {
		return nil, err
	}
	s := &Sentinel{bin: bin, dir: dir, nodes: map[string]*process{}, sentinels: map[string]*process{}}
	deadline := time.Now().Add(startTimeout)
	primary, err := s.startFreeNode("", deadline)
	if err != nil {
		s.stop()
		return nil, err
	}
	replica, err := s.startFreeNode(primary, deadline)
	if err != nil {
		s.stop()
		return nil, err
	}
	if err := waitInSync(replica, deadline); err != nil {
		s.stop()
		return nil, err
	}
	// The Sentinels start after the replica is in sync: a Sentinel asks
	// the primary for its replicas (INFO) as soon as it connects, and
	// only every 10 s after that.
	if err := s.startSentinels(primary, deadline); err != nil {
		s.stop()
		return nil, err
	}
	if err := s.waitWatched(primary, deadline); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// startFreeNode starts a redis-server on a free port, a replica of
// replicaOf unless it is empty, and returns its address.
func (s *Sentinel) startFreeNode(replicaOf string, deadline time.Time) (string, error) {
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := s.startNode(strconv.Itoa(port), replicaOf, deadline)
		if err == nil {
			s.mu.Lock()
			s.nodes[addr] = p
			s.mu.Unlock()
			return addr, nil
		}
		if try < redisPortTries && strings.Contains(err.Error(), "Address already in use") {
			continue
		}
		return "", err
	}
}

// startNode starts a redis-server on port and waits until it answers.
func (s *Sentinel) startNode(port, replicaOf string, deadline time.Time) (*process, error) {
	addr := net.JoinHostPort("127.0.0.1", port)
	args := []string{"--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--dbfilename", "dump-" + port + ".rdb",
		// The primary sends a replica its first copy at once, not after
		// waiting 5 s for more replicas to share it.
		"--repl-diskless-sync-delay", "0",
	}
	if replicaOf != "" {
		host, rport, _ := net.SplitHostPort(replicaOf)
		args = append(args, "--replicaof", host, rport)
	}
	p, err := startProcess("redis-server "+addr, s.dir, nil, false, s.bin, args...)
	if err != nil {
		return nil, err
	}
	if err := waitRedis(addr, p, deadline); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// startSentinels starts the Sentinels on free ports, each told in its
// configuration of the others (known-sentinel, by the id each is given),
// as a Sentinel's own file is once it has met them: otherwise they would
// learn of each other from the hello messages they publish every 2 s. A
// Sentinel rewrites its file with what it learns, so each has its own.
func (s *Sentinel) startSentinels(primary string, deadline time.Time) error {
	host, pport, _ := net.SplitHostPort(primary)
	for try := 1; ; try++ {
		ports := make([]int, sentinelCount)
		ids := make([]string, sentinelCount)
		for i := range ports {
			port, err := freePort()
			if err != nil {
				return err
			}
			ports[i], ids[i] = port, sentinelID()
		}
		var started []*process
		var err error
		for i, port := range ports {
			var b strings.Builder
			fmt.Fprintf(&b, "port %d\nbind 127.0.0.1\ndir %s\nsentinel myid %s\n", port, s.dir, ids[i])
			fmt.Fprintf(&b, "sentinel monitor %s %s %s %d\n", SentinelMaster, host, pport, sentinelQuorum)
			fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", SentinelMaster, SentinelDownAfter.Milliseconds())
			fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", SentinelMaster, sentinelFailoverTimeout.Milliseconds())
			for j, other := range ports {
				if j != i {
					fmt.Fprintf(&b, "sentinel known-sentinel %s 127.0.0.1 %d %s\n", SentinelMaster, other, ids[j])
				}
			}
			conf := filepath.Join(s.dir, "sentinel-"+strconv.Itoa(port)+".conf")
			if err = os.WriteFile(conf, []byte(b.String()), 0o600); err != nil {
				break
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			var p *process
			p, err = startProcess("redis-sentinel "+addr, s.dir, nil, false, s.bin, conf, "--sentinel")
			if err != nil {
				break
			}
			started = append(started, p)
			if err = waitRedis(addr, p, deadline); err != nil {
				break
			}
		}
		if err == nil {
			s.mu.Lock()
			for i, p := range started {
				addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))
				s.sentinels[addr] = p
				s.addrs = append(s.addrs, addr)
			}
			s.mu.Unlock()
			return nil
		}
		inUse := false
		for _, p := range started {
			p.stop()
			inUse = inUse || p.out.contains("Address already in use")
		}
		if try < redisPortTries && inUse {
			continue
		}
		return err
	}
}

// sentinelID returns a new Sentinel id: 40 hex digits.
func sentinelID() string {
	var b [20]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// waitInSync waits until the replica at addr has its primary's data and
// follows its writes.
func waitInSync(addr string, deadline time.Time) error {
	for {
		info, err := nodeCommand(addr, "INFO", "replication")
		if err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s not in sync within %v (%v):\n%s", addr, startTimeout, err, info)
		}
		time.Sleep(20 * time.Millisecond) // polling another process
	}
}

// waitWatched waits until every Sentinel names primary, holds it up,
// knows the other Sentinels, and sees every replica running, up and
// linked to it: the replicas it could promote at once.
func (s *Sentinel) waitWatched(primary string, deadline time.Time) error {
	s.mu.Lock()
	replicas := len(s.nodes) - 1
	addrs := slices.Clone(s.addrs)
	s.mu.Unlock()
	_, port, _ := net.SplitHostPort(primary)
	want := map[string]string{"ip": "127.0.0.1", "port": port, "flags": "master", "num-other-sentinels": strconv.Itoa(len(addrs) - 1)}
	for _, a := range addrs {
		for {
			err := sentinelWatches(a, want, replicas)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				s.mu.Lock()
				out := s.sentinels[a].out
				s.mu.Unlock()
				return fmt.Errorf("sentinel %s not watching %s with %d replicas and %d other sentinels within %v: %v; its output ends:\n%s",
					a, primary, replicas, len(addrs)-1, startTimeout, err, out)
			}
			time.Sleep(20 * time.Millisecond) // polling another process
		}
	}
	return nil
}

// sentinelWatches checks what the Sentinel at addr says of the primary
// (SENTINEL MASTER) against want, and that it sees n replicas up, all
// linked to the primary (SENTINEL REPLICAS).
func sentinelWatches(addr string, want map[string]string, n int) error {
	c := sentinelClient(addr)
	defer c.Close()
	ctx := context.Background()
	got, err := c.Master(ctx, SentinelMaster).Result()
	if err != nil {
		return err
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("primary's %s is %q, want %q", k, got[k], v)
		}
	}
	replicas, err := c.Replicas(ctx, SentinelMaster).Result()
	if err != nil {
		return err
	}
	up := 0
	for _, r := range replicas {
		if r["flags"] == "slave" && r["master-link-status"] == "ok" {
			up++
		}
	}
	if up != n || len(replicas) != n {
		return fmt.Errorf("%d replicas up and linked of %d known, want %d: %v", up, len(replicas), n, replicas)
	}
	return nil
}

func (s *Sentinel) stop() {
	s.mu.Lock()
	procs := make([]*process, 0, len(s.nodes)+len(s.sentinels))
	for _, p := range s.sentinels {
		procs = append(procs, p)
	}
	for _, p := range s.nodes {
		procs = append(procs, p)
	}
	s.nodes, s.sentinels = nil, nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.stop)
	}
	wg.Wait()
	os.RemoveAll(s.dir)
}

// sentinelClient returns a client of one Sentinel, asking once, quickly.
func sentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
}

// sentinelPrimary asks the Sentinel at addr for the primary's address.
func sentinelPrimary(addr string) (string, error) {
	c := sentinelClient(addr)
	defer c.Close()
	hp, err := c.GetMasterAddrByName(context.Background(), SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", errors.New("GET-MASTER-ADDR-BY-NAME answered " + strings.Join(hp, " "))
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}
