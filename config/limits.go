package config

import (
	"math"
	"time"
)

// Resolved are the concrete limits of one tenant: its own Limits over
// Config.Defaults.
type Resolved struct {
	IngestRate   float64 // messages/s admitted at the front door
	IngestBurst  int
	ProcessRate  float64 // messages/s started by workers, fleet-wide
	ProcessBurst int
	Concurrency  int // messages in progress at once, fleet-wide
	SoftBacklog  int // admission starts shrinking here
	MaxBacklog   int // admission stops here
	// DropAge, when above 0, replaces worker.drop_age for the tenant's
	// messages.
	DropAge time.Duration
}

// Limits returns r with every field set, for storing or printing.
func (r Resolved) Limits() Limits {
	return Limits{
		IngestRate:   &r.IngestRate,
		IngestBurst:  &r.IngestBurst,
		ProcessRate:  &r.ProcessRate,
		ProcessBurst: &r.ProcessBurst,
		Concurrency:  &r.Concurrency,
		SoftBacklog:  &r.SoftBacklog,
		MaxBacklog:   &r.MaxBacklog,
		DropAge:      new(Duration(r.DropAge)),
	}
}

// Resolve returns l with each unset field taken from c.Defaults (and, should
// c.Defaults itself leave one unset, from Default).
func (c Config) Resolve(l Limits) Resolved {
	d := Default().Defaults
	return Resolved{
		IngestRate:   pick(l.IngestRate, c.Defaults.IngestRate, d.IngestRate),
		IngestBurst:  pick(l.IngestBurst, c.Defaults.IngestBurst, d.IngestBurst),
		ProcessRate:  pick(l.ProcessRate, c.Defaults.ProcessRate, d.ProcessRate),
		ProcessBurst: pick(l.ProcessBurst, c.Defaults.ProcessBurst, d.ProcessBurst),
		Concurrency:  pick(l.Concurrency, c.Defaults.Concurrency, d.Concurrency),
		SoftBacklog:  pick(l.SoftBacklog, c.Defaults.SoftBacklog, d.SoftBacklog),
		MaxBacklog:   pick(l.MaxBacklog, c.Defaults.MaxBacklog, d.MaxBacklog),
		DropAge:      time.Duration(pick(l.DropAge, c.Defaults.DropAge, d.DropAge)),
	}
}

// TenantLimits returns the concrete limits of t.
func (c Config) TenantLimits(t Tenant) Resolved { return c.Resolve(t.Limits) }

// pick returns the value of the first non-nil pointer.
func pick[T any](ps ...*T) T {
	for _, p := range ps {
		if p != nil {
			return *p
		}
	}
	var zero T
	return zero
}

// ValidateLimits checks the fields l sets, and that its soft backlog does
// not exceed its max backlog once resolved against c.Defaults. Keys in the
// returned KeyErrors are the bare YAML names ("ingest_rate"), so that the
// admin API can check a tenant's limits before storing them.
func (c Config) ValidateLimits(l Limits) error {
	var p problems
	c.checkLimits(&p, "", l)
	return p.err()
}

// checkLimits adds the problems of l, naming keys prefix+name.
func (c Config) checkLimits(p *problems, prefix string, l Limits) {
	rate := func(name string, v *float64) {
		if v != nil && !(*v > 0 && !math.IsInf(*v, 0)) {
			p.add(prefix+name, 0, "must be a positive number of messages per second, got %v", *v)
		}
	}
	atLeast := func(name string, v *int, lowest int) {
		if v != nil && *v < lowest {
			p.add(prefix+name, 0, "must be at least %d, got %d", lowest, *v)
		}
	}
	rate("ingest_rate", l.IngestRate)
	atLeast("ingest_burst", l.IngestBurst, 1)
	rate("process_rate", l.ProcessRate)
	atLeast("process_burst", l.ProcessBurst, 1)
	atLeast("concurrency", l.Concurrency, 1)
	atLeast("soft_backlog", l.SoftBacklog, 0)
	atLeast("max_backlog", l.MaxBacklog, 1)
	if l.DropAge != nil && *l.DropAge < 0 {
		p.add(prefix+"drop_age", 0, "must not be negative, got %v", time.Duration(*l.DropAge))
	}
	if l.SoftBacklog != nil || l.MaxBacklog != nil {
		r := c.Resolve(l)
		if r.SoftBacklog > r.MaxBacklog {
			p.add(prefix+"soft_backlog", 0, "%d exceeds max_backlog %d", r.SoftBacklog, r.MaxBacklog)
		}
	}
}
