//go:build unix

package harness

import "syscall"

// The signals that stall a process and continue it.
const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)
