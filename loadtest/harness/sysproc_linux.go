package harness

import "syscall"

// sysProcAttr makes a child process die with the harness: the kernel sends
// it SIGKILL when the thread that started it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
