// Package dedupe remembers which messages a worker has run, by their
// fairq id, so that another copy of a message is deleted without reaching
// the application. Copies arise from the gateway sending a message again
// after a send that timed out but landed (the client's retry carries the
// same id), and from SQS delivering a message twice (standard queues are
// at least once).
//
// Before it pushes a message, the worker claims its id:
//
//   - Run: the id is new; the worker runs the message, then calls
//     Complete after a success (the id is remembered as done for the
//     window) or Release after a failure (the next delivery runs again).
//     The claim is a lease of about a visibility timeout, which the
//     worker's heartbeat renews while the job runs, so that a crashed
//     worker's claim lapses when its message comes back.
//   - Duplicate: a copy completed within the window: delete this one.
//   - Running: another worker holds the claim; this copy waits for
//     RetryAfter and is received again.
//
// Memory keeps the ids of one worker, bounded; Redis those of a fleet,
// about 100 bytes of Redis memory per message run within the window. It
// costs a worker two Redis round trips per message: the claim, and the
// completion. Delivery stays at least once: a worker that crashes between
// the push and Complete leaves the message to run again.
package dedupe
