package harness

import (
	"syscall"
	"time"
)

// sysProcAttr makes a child process die with the harness: the kernel sends
// it SIGKILL when the thread that started it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// rusageThread is getrusage's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1

// threadCPU returns a function that reads the CPU time (user and system)
// of the thread it is called on; the caller locks its goroutine to that
// thread.
func threadCPU() (func() time.Duration, bool) {
	return func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(rusageThread, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}, true
}
