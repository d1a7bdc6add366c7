// Package gatewaytest holds test doubles for the gateway's collaborators:
// a Picker that needs no depth readings and a Backend that fails on
// demand. They are for tests only; production wiring uses sharding.Tracker
// and a queue backend.
package gatewaytest
