package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SlowBody is what the slow-body attack did to the gateway.
type SlowBody struct {
	// Opened is how many attack connections were opened and sent their
	// request head and one byte of body; Answered how many the gateway
	// answered or closed before the attack let go of them, and Status
	// the first status line it answered with.
	Opened   int    `json:"opened"`
	Answered int    `json:"answered"`
	Status   string `json:"status,omitempty"`
	// Aborted is set when the attack ended early because the gateway's
	// memory went past Fault.AbortRSS; Killed when the harness killed
	// the gateway past Fault.KillRSS (and started it again), and
	// KilledAt is the VmRSS it was killed at.
	Aborted  bool  `json:"aborted"`
	Killed   bool  `json:"killed"`
	KilledAt int64 `json:"killed_at,omitempty"`
	// Opening, Holding and Closed are since the start of the load: when
	// the first connection opened, when the last had sent its byte, when
	// all were closed.
	Opening time.Duration `json:"opening"`
	Holding time.Duration `json:"holding"`
	Closed  time.Duration `json:"closed"`
	// RSSBefore is the gateway's VmRSS just before the attack, RSSMax its
	// peak while the connections were open, RSSMaxAfter its peak from
	// their close to Fault.After later (a gateway that takes the
	// connections late grows after they closed), RSSAfter its VmRSS
	// then; HWMAfter is VmHWM then.
	RSSBefore   int64 `json:"rss_before"`
	RSSMax      int64 `json:"rss_max"`
	RSSMaxAfter int64 `json:"rss_max_after"`
	RSSAfter    int64 `json:"rss_after"`
	HWMAfter    int64 `json:"hwm_after"`
	// Others is the normal tenants' send latency (first attempts) for
	// messages sent while the connections were open; Before the same for
	// messages sent before the attack.
	Others Quantiles `json:"others"`
	Before Quantiles `json:"before"`
}

// The slow-body connections open attackStep at a time, attackPause apart
// (1,000 in 10 s), so that the gateway's memory is read while they open.
const (
	attackStep  = 25
	attackPause = 250 * time.Millisecond
)

// slowBody opens Fault.Attackers connections to the gateway, each sending
// POST /v1/messages/batch with the attacker's valid key, Content-Length
// Fault.AttackLength and one byte of body, holds them Fault.For and
// closes them.
func (e *chaosEnv) slowBody(ctx context.Context, key string) error {
	f, res := e.f, e.res
	sb := &SlowBody{}
	res.SlowBody = sb
	before, ok := e.mem.now("gateway")
	if !ok {
		return fmt.Errorf("gateway memory unreadable before the attack")
	}
	sb.RSSBefore = before.RSS
	head := "POST /v1/messages/batch HTTP/1.1\r\nHost: " + e.sys.gatewayAddr + "\r\n" +
		"Authorization: Bearer " + key + "\r\nContent-Type: application/json\r\n" +
		"Content-Length: " + strconv.FormatInt(f.AttackLength, 10) + "\r\n\r\n{"

	var answered atomic.Int64
	var mu sync.Mutex // guards sb.Status
	var readers sync.WaitGroup
	var conns []net.Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
		readers.Wait()
	}
	sb.Opening = time.Since(res.Start)
	d := net.Dialer{Timeout: 5 * time.Second}
	for i := range f.Attackers {
		// The connections open in steps, each given a moment to reach
		// the gateway's handler before its memory is read.
		if i > 0 && i%attackStep == 0 {
			if sleepUntil(ctx, time.Now().Add(attackPause)) != nil {
				break
			}
			stop, err := e.guard(ctx)
			if err != nil {
				closeAll()
				return err
			}
			if stop {
				break
			}
		}
		c, err := d.DialContext(ctx, "tcp", e.sys.gatewayAddr)
		if err == nil {
			_, err = c.Write([]byte(head))
		}
		if err != nil {
			if c != nil {
				c.Close()
			}
			closeAll()
			return fmt.Errorf("slow-body connection %d: %w", len(conns)+1, err)
		}
		conns = append(conns, c)
		// A reader per connection notices the gateway answering or
		// hanging up before the attack lets go.
		readers.Go(func() {
			line, err := bufio.NewReader(c).ReadString('\n')
			if line != "" || err != nil && !isClosedByUs(err) {
				answered.Add(1)
			}
			if line != "" {
				mu.Lock()
				if sb.Status == "" {
					sb.Status = strings.TrimSpace(line)
				}
				mu.Unlock()
			}
		})
	}
	sb.Opened = len(conns)
	sb.Holding = time.Since(res.Start)
	e.log.Info("slow-body: connections open", "n", sb.Opened, "took", sb.Holding-sb.Opening)

	// Hold until For after the fault began, unless the gateway's memory
	// passes AbortRSS.
	end := res.Start.Add(res.FaultStart + f.For)
	tick := time.NewTicker(memEvery)
	defer tick.Stop()
	for stop := sb.Aborted; !stop && time.Now().Before(end); {
		select {
		case <-ctx.Done():
			stop = true
		case <-tick.C:
			var err error
			if stop, err = e.guard(ctx); err != nil {
				closeAll()
				return err
			}
		}
	}
	closeAll()
	sb.Closed = time.Since(res.Start)
	sb.Answered = int(answered.Load())
	e.log.Info("slow-body: connections closed", "answered_early", sb.Answered)
	return nil
}

// afterSlowBody waits Fault.After from the attack's end, the load going
// on and the gateway's memory guarded, and reads its memory then.
func (e *chaosEnv) afterSlowBody(ctx context.Context) error {
	sb := e.res.SlowBody
	e.log.Info("slow-body: watching the gateway", "for", e.f.After)
	end := e.res.Start.Add(sb.Closed + e.f.After)
	tick := time.NewTicker(memEvery)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil // the load ends with ctx too
		case <-tick.C:
		}
		if _, err := e.guard(ctx); err != nil {
			return err
		}
	}
	after, ok := e.mem.now("gateway")
	if !ok {
		return fmt.Errorf("gateway memory unreadable after the attack")
	}
	sb.RSSAfter, sb.HWMAfter = after.RSS, after.HWM
	return nil
}

// guard reads the gateway's memory during and after the attack, to spare
// the machine: past Fault.AbortRSS the attack must let go of its
// connections; past Fault.KillRSS (a gateway that takes the connections
// late goes on growing after that) the gateway is killed, once, and
// started again so that the load goes on. It reports whether the attack
// must let go.
func (e *chaosEnv) guard(ctx context.Context) (stop bool, err error) {
	sb, f := e.res.SlowBody, e.f
	m, ok := e.mem.now("gateway")
	if !ok {
		return sb.Aborted, nil
	}
	if f.KillRSS > 0 && m.RSS > f.KillRSS && !sb.Killed {
		e.log.Warn("slow-body: the gateway's memory passed the kill bound: killing it", "rss", m.RSS, "bound", f.KillRSS)
		e.sys.killGateway()
		sb.Killed, sb.KilledAt, sb.Aborted = true, m.RSS, true
		return true, e.restartGateway(ctx)
	}
	if f.AbortRSS > 0 && m.RSS > f.AbortRSS && !sb.Aborted {
		e.log.Warn("slow-body: the gateway's memory passed the abort bound: letting go", "rss", m.RSS, "bound", f.AbortRSS)
		sb.Aborted = true
	}
	return sb.Aborted, nil
}

// restartGateway starts the gateway again and follows its memory.
func (e *chaosEnv) restartGateway(ctx context.Context) error {
	if err := e.sys.startGateway(ctx); err != nil {
		return fmt.Errorf("restart the gateway: %w", err)
	}
	e.mem.track("gateway", e.sys.gateway)
	return nil
}

// isClosedByUs reports whether a read failed because the harness closed
// the connection itself.
func isClosedByUs(err error) bool { return errors.Is(err, net.ErrClosed) }
