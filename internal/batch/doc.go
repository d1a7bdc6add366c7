// Package batch coalesces single operations on queues into batch calls:
// the gateway's sends (SendMessageBatch) and the worker's deletes,
// visibility changes and moves. A Batcher gathers items per key (a queue
// name), flushes each batch in a goroutine it owns, and gives every item
// its own result: a Ticket to wait on, or a callback.
//
// The two modes differ only in when a batch that has no flush of its key
// under way goes:
//
//   - GroupCommit (the gateway): at once, the way a database groups
//     commits. Items gather only behind a flush in flight, for at most
//     Window, so a lone item waits for nothing and the calls per item
//     fall as the load rises and as the calls slow down. It suits callers
//     who wait for the answer (an HTTP client waiting for its 202).
//   - Linger (the worker): every batch waits up to Window after its first
//     item for others to join it. It suits work nobody waits for (a delete
//     after a job's outcome), where fewer calls are worth a few
//     milliseconds.
//
// In both, a batch goes as soon as it is full (MaxItems, MaxBytes), and
// MaxFlushes can bound the flushes under way at once. See
// docs/architecture.md for how the batches fit the flow of a message.
package batch
