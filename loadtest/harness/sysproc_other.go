//go:build !linux

package harness

import (
	"syscall"
	"time"
)

// sysProcAttr is nil where the kernel has no parent-death signal: a child
// outlives a harness that is killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// threadCPU has no thread's CPU time to read here: Burn counts its bursts'
// time instead.
func threadCPU() (func() time.Duration, bool) { return nil, false }
