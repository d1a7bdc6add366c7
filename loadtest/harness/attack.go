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
	// memory went past Fault.AbortRSS.
	Aborted bool `json:"aborted"`
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

// The slow-body connections open attackStep at a time, attackPause apart.
const (
	attackStep  = 25
	attackPause = 50 * time.Millisecond
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
	// Past AbortRSS the attack lets go at once, so that it cannot take
	// the machine's memory.
	overAbort := func() bool {
		m, ok := e.mem.now("gateway")
		if ok && f.AbortRSS > 0 && m.RSS > f.AbortRSS {
			e.log.Warn("slow-body: the gateway's memory passed the abort bound: letting go", "rss", m.RSS, "bound", f.AbortRSS)
			sb.Aborted = true
		}
		return sb.Aborted
	}
	sb.Opening = time.Since(res.Start)
	d := net.Dialer{Timeout: 5 * time.Second}
	for i := range f.Attackers {
		// The connections open in steps, each given a moment to reach
		// the gateway's handler before its memory is read.
		if i > 0 && i%attackStep == 0 {
			if sleepUntil(ctx, time.Now().Add(attackPause)) != nil || overAbort() {
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
	for time.Now().Before(end) && !sb.Aborted && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			overAbort()
		}
	}
	tick.Stop()
	closeAll()
	sb.Closed = time.Since(res.Start)
	sb.Answered = int(answered.Load())
	e.log.Info("slow-body: connections closed", "answered_early", sb.Answered)
	return nil
}

// afterSlowBody waits Fault.After from the attack's end, the load going
// on, and reads the gateway's memory then.
func (e *chaosEnv) afterSlowBody(ctx context.Context) error {
	sb := e.res.SlowBody
	e.log.Info("slow-body: watching the gateway", "for", e.f.After)
	if err := sleepUntil(ctx, e.res.Start.Add(sb.Closed+e.f.After)); err != nil {
		return nil // the load ends with ctx too
	}
	after, ok := e.mem.now("gateway")
	if !ok {
		return fmt.Errorf("gateway memory unreadable after the attack")
	}
	sb.RSSAfter, sb.HWMAfter = after.RSS, after.HWM
	return nil
}

// isClosedByUs reports whether a read failed because the harness closed
// the connection itself.
func isClosedByUs(err error) bool { return errors.Is(err, net.ErrClosed) }
