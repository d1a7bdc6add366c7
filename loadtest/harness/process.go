package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopTimeout bounds how long a child may take to exit after SIGTERM
// before it is killed: fairq's own grace period (25 s for in-flight jobs)
// plus a margin.
const stopTimeout = 40 * time.Second

// process is a child process of the harness (a fairq role, redis-server, the
// SQS emulator) whose output goes to a log file and to a tail kept for
// error messages. A goroutine waits for it and closes done when it exits.
type process struct {
	name  string
	cmd   *exec.Cmd
	log   *os.File
	tail  *tail
	stdin io.WriteCloser // nil unless the process watches its stdin
	done  chan struct{}
	err   error // the result of cmd.Wait, set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts bin with args, its stdout and stderr appended to
// logPath; env is added to the harness's environment. With keepStdin the
// child gets a pipe as standard input that stays open until stop (the SQS
// emulator exits when it closes). stdout, when not nil, also receives the
// child's standard output.
func startProcess(name, dir, logPath string, env []string, keepStdin bool, stdout io.Writer, bin string, args ...string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, log: f, tail: &tail{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	out := io.MultiWriter(f, p.tail)
	p.cmd.Stdout = out
	if stdout != nil {
		p.cmd.Stdout = io.MultiWriter(out, stdout)
	}
	p.cmd.Stderr = out
	p.cmd.WaitDelay = 5 * time.Second // do not hang on pipes held by a grandchild
	p.cmd.SysProcAttr = sysProcAttr()
	if keepStdin {
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			f.Close()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
	}
	if err := p.cmd.Start(); err != nil {
		if p.stdin != nil {
			p.stdin.Close()
		}
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		p.log.Close()
		close(p.done)
	}()
	return p, nil
}

// exitError describes the exit of a process that has ended, with the tail
// of its output.
func (p *process) exitError() error {
	return fmt.Errorf("%w: %s (%v); its output ends:\n%s", ErrProcessExited, p.name, p.err, p.tail)
}

// cpuTime returns the CPU time, user and system, the process has used:
// from /proc while it runs, from its resource usage once it has exited.
func (p *process) cpuTime() (time.Duration, bool) {
	if p.running() {
		if d, ok := pidCPU(p.cmd.Process.Pid); ok {
			return d, true
		}
		// It exited between the two looks: its usage comes with its end.
		select {
		case <-p.done:
		case <-time.After(time.Second):
			return 0, false
		}
	}
	s := p.cmd.ProcessState
	if s == nil {
		return 0, false
	}
	return s.UserTime() + s.SystemTime(), true
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid is the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the process, if it is still running.
func (p *process) signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s %v: %w", p.name, sig, err)
	}
	return nil
}

// kill ends the process with SIGKILL, as a crash or the OOM killer would,
// and waits for it to exit. A killed process is not stopped again: its
// exit is the point.
func (p *process) kill() {
	p.stopOnce.Do(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
}

// stop ends the process as an operator would (closing its stdin, then
// SIGTERM, then SIGKILL after stopTimeout or when ctx ends) and waits for
// it. It returns an error if the process had exited on its own with a
// failure, or had to be killed. It is safe to call more than once.
func (p *process) stop(ctx context.Context) error {
	p.stopOnce.Do(func() {
		if !p.running() {
			if p.err != nil {
				p.stopErr = p.exitError()
			}
			return
		}
		if p.stdin != nil {
			p.stdin.Close()
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.cmd.Process.Kill()
		}
		t := time.NewTimer(stopTimeout)
		defer t.Stop()
		select {
		case <-p.done:
			if p.err != nil {
				p.stopErr = fmt.Errorf("%s did not exit cleanly after SIGTERM: %w; its output ends:\n%s", p.name, p.err, p.tail)
			}
		case <-t.C:
			p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("%s killed: no exit within %v of SIGTERM", p.name, stopTimeout)
		case <-ctx.Done():
			p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("%s killed: %w", p.name, ctx.Err())
		}
	})
	return p.stopErr
}

// tailSize is how much of a child's output is kept for error messages.
const tailSize = 4 << 10

// tail keeps the last tailSize bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
