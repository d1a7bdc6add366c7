// Package idempotency remembers the Idempotency-Keys of enqueue requests,
// so that a client that repeats a request gets the first request's answer
// and no second message (IETF httpapi Idempotency-Key draft).
//
// A key is claimed before its message is sent and resolved when the send
// resolves:
//
//   - Claim on a new key makes the caller its owner for a lease, and
//     records the id the message will be sent with and a fingerprint of
//     the request. A repeat while the owner holds the lease is
//     InProgress (409); a repeat with another fingerprint is Reused
//     (422); a repeat after Complete is Done, with the first answer.
//   - Complete stores the answer for the window.
//   - Release forgets the key: nothing was sent (the request was refused),
//     so a repeat may send.
//   - Abandon frees the key but keeps its id: the send failed in a way
//     that may still have reached the queue (a timeout), so the repeat
//     that claims the key next is given the same id and sends the message
//     again under it. Two copies then carry one id, and the worker
//     delivers it once (package dedupe). An owner that crashes is
//     abandoned when its lease runs out.
//
// Memory keeps the keys of one process, bounded; Redis those of a fleet.
// Both have the same semantics, held together by one test suite. See
// docs/architecture.md for where the gateway uses them.
package idempotency
