package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// application is the application behind the workers as a run sees it:
// the harness's own sink (newSink) or the same sink in a process of its
// own (startApp).
type application interface {
	// url is the push URL of the workers.
	url() string
	// fix makes the application answer 200 to every push from now on and
	// mark each as redriven.
	fix(ctx context.Context) error
	// busy returns the number of pushes being answered.
	busy() int64
	// snapshot returns a copy of the deliveries recorded so far.
	snapshot() []Delivery
	// maxInFlight returns, for each tenant, the most of its pushes
	// answered at once.
	maxInFlight() map[string]int64
	// Stop stops serving, waiting for running pushes until ctx ends. It
	// is safe to call more than once.
	Stop(ctx context.Context) error
}

var (
	_ application = (*sink)(nil)
	_ application = (*appProcess)(nil)
)

// fixPath is where an application process takes the harness's fix
// (POST): no push of fairq's comes there, as the workers push to "/".
const fixPath = "/harness/fix"

// appEvent is one line of an application process's standard output: first
// the address it listens on, then each push's begin and end, in the order
// they happened.
type appEvent struct {
	Addr   string    `json:"addr,omitempty"`
	Begin  bool      `json:"begin,omitempty"`
	Tenant string    `json:"tenant,omitempty"` // the tenant of a begin
	End    *Delivery `json:"end,omitempty"`
}

// eventLog is the pushLog of an application process: each push's begin
// and end, one JSON line each, written at once.
type eventLog struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
	err error // the first write that failed
}

func newEventLog(w io.Writer) *eventLog {
	b := bufio.NewWriter(w)
	return &eventLog{w: b, enc: json.NewEncoder(b)}
}

func (l *eventLog) write(e appEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if l.err = l.enc.Encode(e); l.err == nil {
		l.err = l.w.Flush()
	}
}

func (l *eventLog) begin(tenant string) { l.write(appEvent{Begin: true, Tenant: tenant}) }
func (l *eventLog) end(d Delivery)      { l.write(appEvent{End: &d}) }

// ServeApp serves the harness's sink as an application process of its own
// (command loadtest/app) until ctx ends: pushes are answered after their
// tenant's processing time in work, with 500 for poison messages until a
// POST to /harness/fix. It writes events to out, one JSON object a line:
// first {"addr": …}, the address it listens on, then each push's begin and
// its end (a Delivery). At the end it waits at most stopWait for the
// pushes being answered.
func ServeApp(ctx context.Context, work map[string]time.Duration, out io.Writer, stopWait time.Duration) error {
	log := newEventLog(out)
	s, err := listenSink(work, log)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+fixPath, func(w http.ResponseWriter, _ *http.Request) {
		s.fix(context.Background())
		w.WriteHeader(http.StatusNoContent)
	})
	mux.Handle("/", s)
	s.srv.Handler = mux
	log.write(appEvent{Addr: s.ln.Addr().String()})
	if err := s.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
	defer cancel()
	err = s.Stop(stop)
	log.mu.Lock()
	defer log.mu.Unlock()
	return errors.Join(err, log.err)
}

// ParseWork parses the processing times of ServeApp's tenants:
// "tenant=duration" pairs, comma-separated.
func ParseWork(s string) (map[string]time.Duration, error) {
	work := make(map[string]time.Duration)
	for pair := range strings.SplitSeq(s, ",") {
		if pair == "" {
			continue
		}
		id, d, ok := strings.Cut(pair, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("work %q: want tenant=duration", pair)
		}
		v, err := time.ParseDuration(d)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("work %q: want a duration of 0 or more", pair)
		}
		work[id] = v
	}
	return work, nil
}

// formatWork is the tenants' processing times as ParseWork reads them.
func formatWork(tenants []Tenant) string {
	pairs := make([]string, 0, len(tenants))
	for _, t := range tenants {
		pairs = append(pairs, t.ID+"="+t.Work.String())
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// appProcess is the sink in a process of its own (the loadtest/app
// command, ServeApp), so that the time a push waits to be answered is not
// spent in the harness's process, busy sending the load; the harness
// records what its events say.
type appProcess struct {
	*recorder
	proc   *process
	addr   string
	client *http.Client
	wg     sync.WaitGroup // the event reader and the pipe's closer
	read   error          // why the event reader stopped, set before wg is done

	stopOnce sync.Once
	stopErr  error
}

// appStart bounds how long an application process may take to say where
// it listens.
const appStart = 10 * time.Second

// appStopWait is how long an application process waits for the pushes
// being answered when it stops (its -stop-wait).
const appStopWait = 10 * time.Second

// startApp starts the application process bin for the tenants, its output
// logged in dir/app.log, and waits for its address.
func startApp(ctx context.Context, bin, dir string, tenants []Tenant) (*appProcess, error) {
	pr, pw := io.Pipe()
	a := &appProcess{recorder: newRecorder(tenants), client: &http.Client{Timeout: 5 * time.Second}}
	p, err := startProcess("app", dir, filepath.Join(dir, "app.log"), nil, false, pw, bin,
		"-work", formatWork(tenants), "-stop-wait", appStopWait.String())
	if err != nil {
		return nil, err
	}
	a.proc = p
	addr := make(chan string, 1)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		<-p.done
		pw.Close() // the process has exited and its output is copied
	}()
	go func() {
		defer a.wg.Done()
		a.read = a.readEvents(pr, addr)
		io.Copy(io.Discard, pr) // a line it could not read: keep the process's output flowing
	}()
	t := time.NewTimer(appStart)
	defer t.Stop()
	select {
	case a.addr = <-addr:
		return a, nil
	case <-p.done:
		err = p.exitError()
	case <-t.C:
		err = fmt.Errorf("app: no address within %v", appStart)
	case <-ctx.Done():
		err = ctx.Err()
	}
	return nil, errors.Join(err, a.Stop(context.WithoutCancel(ctx)))
}

// readEvents records the events read from r until it ends, sending the
// address to addr.
func (a *appProcess) readEvents(r io.Reader, addr chan<- string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var e appEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("app: event %.80q: %w", sc.Text(), err)
		}
		switch {
		case e.Addr != "":
			addr <- e.Addr
		case e.Begin:
			a.begin(e.Tenant)
		case e.End != nil:
			a.end(*e.End)
		}
	}
	return sc.Err()
}

func (a *appProcess) url() string { return "http://" + a.addr + "/" }

func (a *appProcess) fix(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.addr+fixPath, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("app: fix: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("app: fix: %s", resp.Status)
	}
	return nil
}

// Stop ends the process (SIGTERM: it answers the pushes in progress, at
// most appStopWait) and waits until every event it wrote is recorded.
func (a *appProcess) Stop(ctx context.Context) error {
	a.stopOnce.Do(func() {
		a.stopErr = a.proc.stop(ctx)
		a.wg.Wait()
		a.stopErr = errors.Join(a.stopErr, a.read)
	})
	return a.stopErr
}
