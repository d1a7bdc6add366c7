package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/queue"
)

func TestMain(m *testing.M) { Main(m, VerifyNoLeaks()) }

func TestRedisAddr(t *testing.T) {
	t.Parallel()
	addr := RedisAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("RedisAddr = %q, want 127.0.0.1:PORT", addr)
	}
	if err := pingRedis(addr); err != nil {
		t.Fatalf("PING %s: %v", addr, err)
	}
	if again := RedisAddr(t); again != addr {
		t.Errorf("second RedisAddr = %q, want the same server %q", again, addr)
	}
}

func TestSQSEndpoint(t *testing.T) {
	t.Parallel()
	endpoint := SQSEndpoint(t)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+$`).MatchString(endpoint) {
		t.Errorf("SQSEndpoint = %q, want http://127.0.0.1:PORT", endpoint)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if err := health(client, endpoint); err != nil {
		t.Fatal(err)
	}
	if again := SQSEndpoint(t); again != endpoint {
		t.Errorf("second SQSEndpoint = %q, want the same emulator %q", again, endpoint)
	}
}

func TestSQSBackend(t *testing.T) {
	t.Parallel()
	b := SQSBackend(t)
	ctx := t.Context()
	name := Prefix(t) + "-q"
	if res, err := b.Create(ctx, queue.Spec{Name: name}); err != nil || res != queue.Created {
		t.Fatalf("Create = %v, %v; want created", res, err)
	}
	const body = "hello 🚀" // above U+FFFF: the launcher lifts fauxqs's limit to SQS's
	sent, err := b.Send(ctx, name, []queue.Entry{{ID: "a", Body: body}})
	if err != nil || sent[0].Err != nil {
		t.Fatalf("Send = %+v, %v", sent, err)
	}
	msgs, err := b.Receive(ctx, name, queue.ReceiveOptions{Wait: time.Second})
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(msgs) != 1 || msgs[0].Body != body {
		t.Fatalf("Receive = %+v, want the message sent", msgs)
	}
}

// TestSQSLongPollWaitsOn: a long poll whose message another receive took
// keeps waiting, as on SQS, rather than answering empty at once as fauxqs
// does unpatched; every waiting poll is woken while messages are left.
func TestSQSLongPollWaitsOn(t *testing.T) {
	t.Parallel()
	b := SQSBackend(t)
	ctx := t.Context()
	name := Prefix(t) + "-q"
	if _, err := b.Create(ctx, queue.Spec{Name: name}); err != nil {
		t.Fatal(err)
	}
	const polls, wait = 3, 3 * time.Second
	type answer struct {
		got  int
		took time.Duration
		err  error
	}
	answers := make(chan answer, polls)
	start := time.Now()
	for range polls {
		go func() {
			msgs, err := b.Receive(ctx, name, queue.ReceiveOptions{Max: 1, Wait: wait})
			answers <- answer{len(msgs), time.Since(start), err}
		}()
	}
	time.Sleep(500 * time.Millisecond) // the polls are waiting
	if sent, err := b.Send(ctx, name, []queue.Entry{{ID: "a", Body: "a"}, {ID: "b", Body: "b"}}); err != nil || sent[0].Err != nil || sent[1].Err != nil {
		t.Fatalf("Send = %+v, %v", sent, err)
	}
	var got int
	for range polls {
		a := <-answers
		switch {
		case a.err != nil:
			t.Fatalf("Receive: %v", a.err)
		case a.got == 0 && a.took < wait-500*time.Millisecond:
			t.Errorf("a poll answered empty after %v of its %v wait", a.took.Round(time.Millisecond), wait)
		}
		got += a.got
	}
	if got != 2 {
		t.Errorf("the polls received %d messages, want the 2 sent", got)
	}
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^t[0-9a-f]{8}$`)
	seen := make(map[string]bool)
	for range 100 {
		p := Prefix(t)
		if !valid.MatchString(p) {
			t.Fatalf("Prefix = %q, want t and 8 hex digits", p)
		}
		if seen[p] {
			t.Fatalf("Prefix %q returned twice", p)
		}
		seen[p] = true
	}
}

// recorder is a testing.TB that records Skip and Fatal instead of acting on
// the real test.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = true
	r.msg = fmtMsg(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmtMsg(format, args...)
	runtime.Goexit()
}

// call runs get on a fresh goroutine, as the testing package runs a test,
// so that Skipf and Fatalf can end it.
func (r *recorder) call(s *service) string {
	var addr string
	done := make(chan struct{})
	go func() {
		defer close(done)
		addr = s.get(r)
	}()
	<-done
	return addr
}

func TestServiceMissing(t *testing.T) {
	missing := &missingError{what: "frobnicator is not on PATH", how: "install it"}
	tests := []struct {
		name        string
		require     string
		startErr    error
		wantSkipped bool
		wantFailed  bool
	}{
		{name: "missing skips", startErr: missing, wantSkipped: true},
		{name: "missing fails when required", require: "1", startErr: missing, wantFailed: true},
		{name: "broken fails", startErr: errors.New("exited (exit status 1)"), wantFailed: true},
		{name: "broken fails when required", require: "1", startErr: errors.New("exited"), wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(RequireEnv, tt.require)
			starts := 0
			s := &service{name: "frobnicator", start: func() (string, stopper, error) {
				starts++
				return "", nil, tt.startErr
			}}
			for range 2 { // the error is remembered, not retried
				r := &recorder{TB: t}
				r.call(s)
				if r.skipped != tt.wantSkipped || r.failed != tt.wantFailed {
					t.Fatalf("skipped, failed = %v, %v; want %v, %v (message %q)", r.skipped, r.failed, tt.wantSkipped, tt.wantFailed, r.msg)
				}
				if !strings.Contains(r.msg, tt.startErr.Error()) {
					t.Errorf("message %q does not say %q", r.msg, tt.startErr)
				}
			}
			if starts != 1 {
				t.Errorf("started %d times, want once", starts)
			}
		})
	}
}

func TestStartMissingBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for name, start := range map[string]func() (string, *process, error){
		"redis-server": startRedis,
		"node":         startFauxqs,
	} {
		_, p, err := start()
		if p != nil {
			p.stop()
		}
		var missing *missingError
		if !errors.As(err, &missing) {
			t.Errorf("start with an empty PATH: err = %v, want a missingError", err)
			continue
		}
		if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "make test") {
			t.Errorf("error %q should name %s and `make test`", err, name)
		}
	}
}

func TestRedisExitReported(t *testing.T) {
	t.Parallel()
	RedisAddr(t) // skips or fails like the rest when redis-server is missing
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	p, err := startProcess("redis-server", "", nil, false, bin, "--port", "not-a-port")
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	err = waitRedis("127.0.0.1:1", p, time.Now().Add(startTimeout))
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "not-a-port") {
		t.Errorf("waitRedis = %v, want the exit with redis-server's complaint", err)
	}
}

// TestFauxqsExitsWhenStdinCloses checks that an emulator outlives no test
// binary: its stdin closing (as when the binary is killed) ends it.
func TestFauxqsExitsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	SQSEndpoint(t) // skips like the rest when the emulator cannot run
	_, p, err := startFauxqs()
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	p.stdin.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	select {
	case <-p.done:
		if p.err != nil {
			t.Errorf("fauxqs exited with %v, want 0; output:\n%s", p.err, p.out)
		}
	case <-ctx.Done():
		t.Fatal("fauxqs still running 10 s after its stdin closed")
	}
}

func fmtMsg(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// TestRedisCluster: the shared cluster has three masters and spreads keys
// over them; keys of one hash tag may be used together, keys of several
// slots may not.
func TestRedisCluster(t *testing.T) {
	addrs := RedisCluster(t)
	if len(addrs) != 3 {
		t.Fatalf("%d masters, want 3: %v", len(addrs), addrs)
	}
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	prefix := Prefix(t)
	seen := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("%s:%d", prefix, i)
		if err := c.Set(ctx, key, i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Options().Addr] = true
	}
	if len(seen) != 3 {
		t.Errorf("30 keys landed on %d masters, want all 3", len(seen))
	}
	if err := c.MSet(ctx, "{"+prefix+"}:a", 1, "{"+prefix+"}:b", 2).Err(); err != nil {
		t.Errorf("MSET of one hash tag: %v", err)
	}
	if err := c.Do(ctx, "MSET", prefix+":1", 1, prefix+":2", 2).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("MSET across slots: %v, want CROSSSLOT", err)
	}
}

// TestRedisClusterFailover: a master killed is replaced by its replica;
// the cluster serves every slot again and the key is still there.
func TestRedisClusterFailover(t *testing.T) {
	c := NewRedisCluster(t, 3, 1)
	ctx := context.Background()
	// go-redis learns a new topology at its periodic reload of the slots
	// (60 s by default), or at a MOVED answer a dead node cannot give.
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
	defer client.Close()
	key := Prefix(t)
	if err := client.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	m, err := client.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Do(ctx, "WAIT", 1, 1000).Err(); err != nil { // the replica has the key
		t.Fatal(err)
	}
	c.Kill(t, m.Options().Addr)
	c.WaitHealthy(t, 20*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := client.Get(ctx, key).Result()
		if err == nil && v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failover: %q, %v", v, err)
		}
		time.Sleep(100 * time.Millisecond) // the client learns the new topology
	}
}
