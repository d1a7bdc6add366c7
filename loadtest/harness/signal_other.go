//go:build !unix

package harness

import "syscall"

// A process cannot be stalled here: sending these fails, and the sqs-stall
// fault with it.
const (
	sigStop = syscall.Signal(-1)
	sigCont = syscall.Signal(-1)
)
