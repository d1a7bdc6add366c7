package harness

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// proxy forwards TCP connections on 127.0.0.1 to a server (Redis, the SQS
// emulator) so that the harness can take the server away from fairq and
// give it back without the server losing what it holds: while the proxy is
// down it cuts the connections it carries and closes every new one at once,
// as a partition or a dead server would look to the client.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // the accept loop and the pipes
}

// startProxy listens on a free loopback port and forwards to target until
// close.
func startProxy(target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	p := &proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// addr is the address to give fairq instead of the target's.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// setDown cuts (true) or restores (false) the way to the server.
func (p *proxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// close stops listening, cuts every connection and waits for the
// goroutines.
func (p *proxy) close() {
	p.ln.Close()
	p.setDown(true)
	p.wg.Wait()
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		// Dial outside the lock: a slow dial must not hold up setDown.
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

// pipe copies from src to dst, then closes both.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}
