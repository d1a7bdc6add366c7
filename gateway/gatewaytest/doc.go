// Package gatewaytest holds test doubles for the gateway's collaborators:
// a Picker that needs no depth readings and a Backend that fails on
// demand; and a Contract that holds the gateway's answers to its OpenAPI
// document. They are for tests only (production wiring uses
// sharding.Tracker and a queue backend), and only tests may import the
// package: the Contract's validator must stay out of the fairq binary.
package gatewaytest
