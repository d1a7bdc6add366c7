// Package queuetest is the conformance suite of queue.Backend: every backend
// (queue.Memory, queue.SQS against the emulator or Amazon SQS) must pass
// Run. Each subtest creates its own queues with unique names, so the suite
// can share one SQS endpoint with other tests running in parallel.
//
// The suite holds backends to the behaviour fairq relies on: idempotent
// Create, round trips of bodies and attributes, long polls that wait and
// wake, visibility timeouts and receive counts, delays, batch limits,
// per-entry failures, Depth, redrive to a dead-letter queue and prompt
// cancellation. Timings are short (visibility 1–3 s) and checked with
// generous bounds, so a slow machine does not fail it.
//
// Run is what every backend must pass, the SQS emulator of the tests
// included; RunWith with Options.Strict adds the checks where Memory is
// stricter than the emulator.
package queuetest
