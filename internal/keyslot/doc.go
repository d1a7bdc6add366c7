// Package keyslot computes the hash slot of a Redis key as Redis Cluster
// does, so that tests can hold every group of keys that one script or
// transaction uses to one slot: a Redis Cluster refuses a command whose
// keys lie in several slots (CROSSSLOT). Each package that uses Redis
// names its groups in its export_test.go and checks them with Check; the
// README's "Redis topologies" says which keys share a tag and why.
package keyslot
