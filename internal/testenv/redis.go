package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// RedisAddr returns the host:port of a redis-server on 127.0.0.1, started
// on first use for the whole test binary. It keeps nothing on disk. Tests
// share it: prefix every key with Prefix(t).
func RedisAddr(t testing.TB) string {
	t.Helper()
	return redisService.get(t)
}

// redisPortTries is how often a start is retried when the free port picked
// was taken before redis-server bound it.
const redisPortTries = 5

func startRedis() (string, *process, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, &missingError{
			what: "redis-server is not on PATH",
			how:  "install it (Debian: apt-get install redis-server) or run `make test`, which installs it",
		}
	}
	deadline := time.Now().Add(startTimeout)
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			return "", nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := startProcess("redis-server", "", nil, false, bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--protected-mode", "yes")
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

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitRedis waits until the server at addr answers PING, the process exits,
// or the deadline passes.
func waitRedis(addr string, p *process, deadline time.Time) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for {
		err := pingRedis(addr)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exited()
		case <-expire.C:
			return fmt.Errorf("redis-server on %s not ready after %v (last PING: %v); its output ends:\n%s", addr, startTimeout, err, p.out)
		case <-tick.C:
		}
	}
}

// pingRedis sends one PING in RESP and expects +PONG.
func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return errors.New("PING answered " + strconv.Quote(line))
	}
	return nil
}
