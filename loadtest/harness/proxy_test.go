package harness

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// echoServer answers every line with itself until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// roundTrip sends a line on c and reads its echo.
func roundTrip(c net.Conn, line string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got != line+"\n" {
		return errors.New("echoed " + got)
	}
	return nil
}

func TestProxy(t *testing.T) {
	p, err := startProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	held := dial()
	if err := roundTrip(held, "up"); err != nil {
		t.Fatalf("through the proxy while up: %v", err)
	}
	p.setDown(true)
	if err := roundTrip(held, "cut"); err == nil {
		t.Error("a connection carried when the proxy went down still works")
	}
	if err := roundTrip(dial(), "refused"); err == nil {
		t.Error("a connection made while the proxy is down works")
	}
	p.setDown(false)
	if err := roundTrip(dial(), "back"); err != nil {
		t.Errorf("a new connection once the proxy is up again: %v", err)
	}
}
