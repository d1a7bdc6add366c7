package harness

import "errors"

// Sentinel errors.
var (
	// ErrInvalidOptions is returned by Run for options that cannot work.
	ErrInvalidOptions = errors.New("invalid load test options")
	// ErrProcessExited is returned when a child process (a fairq role or
	// a service) exits while it should be running.
	ErrProcessExited = errors.New("process exited")
	// ErrNeedsSQS is returned for a scenario that stops the workers while
	// the gateway keeps accepting: on the memory backend the queues live
	// inside the one `fairq dev` process, so the workers cannot stop alone.
	ErrNeedsSQS = errors.New("scenario needs the sqs backend (separate gateway and worker processes)")
	// ErrNotReady is returned when a process does not become ready in
	// time.
	ErrNotReady = errors.New("not ready in time")
)
