// Package envelope is the fairq message format on a queue: the three message
// attributes fairq reserves (fairq-tenant, fairq-meta, traceparent) and the
// compact JSON metadata that travels with a message across queue moves
// (DESIGN.md §3). The gateway writes it, the worker and spillover read and
// carry it, so a message keeps its original enqueue time and its attempt
// count wherever it goes.
package envelope
