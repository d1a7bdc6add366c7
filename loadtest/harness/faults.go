package harness

import (
	"context"
	"fmt"
	"time"
)

// inject waits until the fault is due, injects it, undoes it For later
// (restarting what it stopped) and records when, in e.res. attackKey is
// the API key the slow-body connections carry.
func (e *chaosEnv) inject(ctx context.Context, attackKey string) error {
	f, res := e.f, e.res
	if sleepUntil(ctx, res.Start.Add(f.At)) != nil {
		return nil //nolint:nilerr // the load ends with ctx too
	}
	res.FaultStart = time.Since(res.Start)
	e.log.Info("fault", "what", f.Title)
	until := func() error { return sleepUntil(ctx, res.Start.Add(res.FaultStart+f.For)) }
	var err error
	switch f.Name {
	case FaultWorkerKill:
		e.sys.killWorker(0)
		if until() == nil {
			err = e.restartWorker(ctx, 0)
		}
	case FaultWorkerTerm:
		if err = e.sys.stopWorker(ctx, 0); err != nil {
			return fmt.Errorf("SIGTERM worker 1: %w", err)
		}
		if until() == nil {
			err = e.restartWorker(ctx, 0)
		}
	case FaultRedisOpen, FaultRedisClosed:
		e.redis.setDown(true)
		until()
		e.redis.setDown(false)
	case FaultSQSStall:
		if err = e.svc.fauxqs.signal(sigStop); err != nil {
			return err
		}
		until()
		err = e.svc.fauxqs.signal(sigCont)
	case FaultSQSDown:
		e.sqs.setDown(true)
		until()
		e.sqs.setDown(false)
	case FaultApp500:
		e.snk.behave(sinkFailing)
		until()
		e.snk.behave(sinkNormal)
	case FaultAppHang:
		e.snk.behave(sinkHanging)
		until()
		e.snk.behave(sinkNormal)
	case FaultGatewayKill:
		e.sys.killGateway()
		if until() == nil {
			if err = e.sys.startGateway(ctx); err == nil {
				e.mem.track("gateway", e.sys.gateway)
			}
		}
	case FaultSlowBody:
		err = e.slowBody(ctx, attackKey)
	default:
		return fmt.Errorf("%w: fault %q has no injection", ErrInvalidOptions, f.Name)
	}
	res.FaultEnd = time.Since(res.Start)
	if err == nil && f.Name == FaultSlowBody {
		err = e.afterSlowBody(ctx)
	}
	if err != nil {
		return fmt.Errorf("fault %s: %w", f.Name, err)
	}
	return nil
}

// restartWorker starts worker i again and follows its memory.
func (e *chaosEnv) restartWorker(ctx context.Context, i int) error {
	if err := e.sys.startWorker(ctx, i); err != nil {
		return fmt.Errorf("restart worker %d: %w", i+1, err)
	}
	e.mem.track(workerRole(i), e.sys.workers[i])
	return nil
}

// RestartTrial is one round of restart-send.
type RestartTrial struct {
	// Restart is how long the worker took from SIGTERM to healthy again.
	Restart time.Duration `json:"restart"`
	// Accepted says whether the gateway took the message.
	Accepted bool `json:"accepted"`
	// Delay is from the send to the start of the message's first
	// delivery; -1 if it came not within Fault.Deliver.
	Delay time.Duration `json:"delay"`
	// ReceiveCount is X-Aws-Sqsd-Receive-Count of that delivery.
	ReceiveCount int `json:"receive_count"`
}

// restartThenSend runs the restart-send fault: Repeat times, SIGTERM the
// only worker, start it again at once, send one message SendAfter after
// the start began, and wait for its delivery.
func (e *chaosEnv) restartThenSend(ctx context.Context) error {
	f, res := e.f, e.res
	tenant := e.gen.tenants[0].ID
	res.FaultStart = time.Since(res.Start)
	for i := range f.Repeat {
		began := time.Now()
		if err := e.sys.stopWorker(ctx, 0); err != nil {
			return fmt.Errorf("SIGTERM the worker: %w", err)
		}
		restarted := time.Now()
		if err := e.restartWorker(ctx, 0); err != nil {
			return err
		}
		tr := RestartTrial{Restart: time.Since(began), Delay: -1}
		if err := sleepUntil(ctx, restarted.Add(f.SendAfter)); err != nil {
			return err
		}
		s := e.gen.send(ctx, tenant, false)
		e.gen.record(s)
		tr.Accepted = s.Accepted()
		if tr.Accepted {
			d, ok, err := e.snk.waitDelivery(ctx, s.Seq, f.Deliver)
			if err != nil {
				return err
			}
			if ok {
				tr.Delay, tr.ReceiveCount = d.Start.Sub(s.At), d.ReceiveCount
			}
		}
		e.log.Info("restart-send", "round", i+1, "restart", tr.Restart, "accepted", tr.Accepted, "delay", tr.Delay, "receive_count", tr.ReceiveCount)
		res.Trials = append(res.Trials, tr)
	}
	res.FaultEnd = time.Since(res.Start)
	return nil
}
