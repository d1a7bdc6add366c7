//go:build !linux

package harness

import "syscall"

// sysProcAttr is nil where the kernel has no parent-death signal: a child
// outlives a harness that is killed.
func sysProcAttr() *syscall.SysProcAttr { return nil }
