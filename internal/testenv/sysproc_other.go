//go:build !linux

package testenv

import "syscall"

// sysProcAttr has no parent-death signal outside Linux; the emulator still
// exits when its stdin closes, redis-server may outlive a killed test binary.
func sysProcAttr() *syscall.SysProcAttr { return nil }
