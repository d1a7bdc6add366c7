// Package queue is the durable store under fairq: a small Backend interface
// with the semantics of an Amazon SQS standard queue (batches of ten, long
// polling, visibility timeouts, delays, receive counts, redrive to a
// dead-letter queue), and its two implementations, SQS through
// aws-sdk-go-v2 and Memory, the embedded backend of `fairq dev`. Package
// queuetest holds the conformance suite both must pass.
package queue
