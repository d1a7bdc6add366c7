// Package envelope is the fairq message format on a queue: the three message
// attributes fairq reserves on every message (fairq-tenant, fairq-meta,
// traceparent), the compact JSON metadata that travels with a message
// across queue moves, and fairq-task, which makes a message the firing of
// a periodic task. The gateway writes the first three, the scheduler the
// task, the worker and spillover read and carry them, so a message keeps
// its original enqueue time and its attempt count wherever it goes.
package envelope
