// Package batch coalesces single operations on queues into batch calls:
// the gateway's sends (SendMessageBatch) and the worker's deletes,
// visibility changes and moves. A Batcher gathers items per key (a queue
// name), flushes each batch in a goroutine it owns, and gives every item
// its own result: a Ticket to wait on, or a callback.
//
// The two modes differ in whether a batch that is not full waits for
// more items, for at most Window after its first:
//
//   - Adaptive (the gateway): only while more are likely. The Batcher
//     keeps each key's recent rate of items, and a batch waits while the
//     rest of its window is expected, at that rate, to bring a quarter of
//     an item more; otherwise it goes at once. A queue that sees a few
//     messages a second never makes one wait; a busy one gathers batches
//     of what the window brings. A waiting batch also goes once its key
//     has brought nothing for three of its mean gaps: callers that each
//     wait for their answer before sending again are then all in it, and
//     nobody else is coming. It suits callers who wait for the answer
//     (an HTTP client waiting for its 202), who should pay the wait only
//     where it saves calls.
//   - Linger (the worker): always. It suits work nobody waits for (a
//     delete after a job's outcome), where fewer calls are worth a few
//     milliseconds.
//
// A batch that goes at once still takes the items handed over at the same
// moment: its flush yields the processor once before taking them. In both
// modes a batch goes as soon as it is full (MaxItems, MaxBytes), several
// flushes of one key may be under way at once, and MaxFlushes can bound
// the flushes under way. See docs/architecture.md for how the batches fit
// the flow of a message.
package batch
