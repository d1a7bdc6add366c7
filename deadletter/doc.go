// Package deadletter is what an operator does with a deployment's
// dead-letter queue: Peek at the dead letters (their fairq id, tenant,
// last error, attempts, age, and, on request, body), Redrive them back to
// their tenants' shards, and Purge them. `fairq dlq …` and the admin API
// (/admin/v1/dlq) use it; the worker puts messages there after
// worker.max_retries attempts (package consumer).
//
// SQS has no way to look at a queue without receiving from it, so each
// operation receives: a peek hides what it returns for PeekHide, so that
// the next page shows others; the dead letters an operation passes over
// (another tenant's, or ids not asked for) stay invisible while it runs,
// so that it does not read them twice, and are made visible again when it
// ends.
package deadletter
