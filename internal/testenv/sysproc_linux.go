package testenv

import "syscall"

// sysProcAttr makes a service die with the test binary: the kernel sends it
// SIGKILL when the thread that started it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
