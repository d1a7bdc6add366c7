package harness

import (
	"fmt"
	"strings"
)

// Mode is one of the three ways of running fairq that the experiment
// compares side by side. The front door is the same in all three (the
// same admission limits and backpressure): they differ in the queues and
// in what the workers do.
type Mode string

const (
	// ModeSingle is fairness off: one shared queue (pool.queues 1,
	// shard_size 1), no per-tenant worker limits, no backlog queue
	// (worker.backlog_age 0).
	ModeSingle Mode = "single"
	// ModeShuffle is shuffle sharding only: the default pool (8 queues,
	// shards of 2), no per-tenant worker limits, no backlog queue.
	ModeShuffle Mode = "shuffle"
	// ModeFull is the whole of fairq: shuffle sharding, the per-tenant
	// process_rate, process_burst and concurrency limits of the
	// scenario (package throttle, enforced by spillover in the worker),
	// and the backlog queue for messages older than the scenario's
	// backlog age.
	ModeFull Mode = "full"
	// ModeFleet is full fairq run as a fleet: FleetGateways gateways and
	// FleetWorkers workers, separate processes sharing one Redis (a single
	// node or a Redis Cluster) and the SQS emulator, the load spread over
	// the gateways. It is not one of the modes the experiment compares side
	// by side: each fleet run is judged on its own (FleetChecks).
	ModeFleet Mode = "fleet"
)

// Modes are the modes in the order reports show them.
var Modes = []Mode{ModeSingle, ModeShuffle, ModeFull}

// knownModes are the modes ParseMode accepts: "all" is Modes, and fleet is
// asked for by name.
var knownModes = []Mode{ModeSingle, ModeShuffle, ModeFull, ModeFleet}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	for _, m := range knownModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: unknown mode %q (want %s)", ErrInvalidOptions, s, modeNames())
}

// ParseModes parses a comma-separated list of modes; "all" is Modes.
func ParseModes(s string) ([]Mode, error) {
	if s == "all" || s == "" {
		return Modes, nil
	}
	var ms []Mode
	for _, name := range strings.Split(s, ",") {
		m, err := ParseMode(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

func modeNames() string {
	names := make([]string, len(knownModes))
	for i, m := range knownModes {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// Title is the mode's name in reports.
func (m Mode) Title() string {
	switch m {
	case ModeSingle:
		return "one shared queue"
	case ModeShuffle:
		return "shuffle sharding only"
	case ModeFull:
		return "full fairq"
	case ModeFleet:
		return "a fleet of full fairq"
	}
	return string(m)
}

// limited reports whether the mode runs the per-tenant worker limits and
// the backlog queue.
func (m Mode) limited() bool { return m == ModeFull || m == ModeFleet }

// pool returns the mode's pool.queues and pool.shard_size.
func (m Mode) pool() (queues, shardSize int) {
	if m == ModeSingle {
		return 1, 1
	}
	return 8, 2
}
