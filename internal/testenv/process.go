package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopTimeout bounds how long a process may take to exit after SIGTERM
// before it is killed.
const stopTimeout = 5 * time.Second

// process is a service process started by this package. A goroutine waits
// for it and closes done when it has exited; stop ends it and waits for that.
type process struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser // nil unless the process watches its stdin
	out   *tail
	done  chan struct{}
	err   error // the result of cmd.Wait, set before done is closed

	stopOnce sync.Once
}

// startProcess starts a command whose stdout and stderr are kept in a tail;
// stdout also goes to extra when it is not nil. With keepStdin, the process
// gets a pipe as standard input that stays open until stop.
func startProcess(name, dir string, extra io.Writer, keepStdin bool, bin string, args ...string) (*process, error) {
	p := &process{name: name, out: &tail{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout = p.out
	if extra != nil {
		p.cmd.Stdout = io.MultiWriter(p.out, extra)
	}
	p.cmd.Stderr = p.out
	p.cmd.WaitDelay = stopTimeout // do not hang on pipes held by a grandchild
	p.cmd.SysProcAttr = sysProcAttr()
	if keepStdin {
		w, err := p.cmd.StdinPipe()
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		p.stdin = w
	}
	if err := p.cmd.Start(); err != nil {
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited returns an error describing the exit of a process that has ended.
func (p *process) exited() error {
	return fmt.Errorf("%s exited (%v); its output ends:\n%s", p.name, p.err, p.out)
}

// stop ends the process (closing its stdin, then SIGTERM, then SIGKILL after
// stopTimeout) and waits for it. It is safe to call more than once.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
		select {
		case <-p.done:
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			p.cmd.Process.Kill()
		}
		t := time.NewTimer(stopTimeout)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// tail keeps the last tailSize bytes written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept output, indented for an error message.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimRight(string(bytes.ToValidUTF8(t.buf, []byte("?"))), "\n")
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// contains reports whether the kept output contains s.
func (t *tail) contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Contains(t.buf, []byte(s))
}

// firstLine captures the first line written to it and sends it, once, on
// line.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string // buffered 1
}

func newFirstLine() *firstLine { return &firstLine{line: make(chan string, 1)} }

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.sent = true
		f.line <- strings.TrimSpace(string(f.buf[:i]))
		f.buf = nil
	}
	return len(p), nil
}
