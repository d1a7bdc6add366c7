package tenant

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits are a tenant's limits, with the same names in the configuration
// file (YAML) and in the admin API (JSON). A nil field takes the value of
// the defaults, so that "unset" differs from 0; Resolve turns Limits into
// concrete values.
type Limits struct {
	// IngestRate is the messages per second admitted at the front door.
	IngestRate *float64 `yaml:"ingest_rate,omitempty" json:"ingest_rate,omitempty"`
	// IngestBurst is the token bucket size of IngestRate.
	IngestBurst *int `yaml:"ingest_burst,omitempty" json:"ingest_burst,omitempty"`
	// ProcessRate is the messages per second started by workers,
	// fleet-wide.
	ProcessRate *float64 `yaml:"process_rate,omitempty" json:"process_rate,omitempty"`
	// ProcessBurst is the token bucket size of ProcessRate.
	ProcessBurst *int `yaml:"process_burst,omitempty" json:"process_burst,omitempty"`
	// Concurrency is the messages in progress at once, fleet-wide.
	Concurrency *int `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	// SoftBacklog is the backlog at which admission starts shrinking.
	SoftBacklog *int `yaml:"soft_backlog,omitempty" json:"soft_backlog,omitempty"`
	// MaxBacklog is the backlog at which admission stops.
	MaxBacklog *int `yaml:"max_backlog,omitempty" json:"max_backlog,omitempty"`
	// DropAge, when above 0, replaces worker.drop_age for the tenant's
	// messages: older than this, they are dropped unprocessed. For
	// tenants whose data a periodic full sync supersedes.
	DropAge *Duration `yaml:"drop_age,omitempty" json:"drop_age,omitempty"`
}

// Resolved are the concrete limits of one tenant: its own Limits over the
// defaults.
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

// LimitsDefault are the limits of a tenant that neither it nor the
// configured defaults set: the defaults key of a configuration file
// starts from them.
var LimitsDefault = Resolved{
	IngestRate:   100,
	IngestBurst:  200,
	ProcessRate:  100,
	ProcessBurst: 100,
	Concurrency:  10,
	SoftBacklog:  1000,
	MaxBacklog:   10000,
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

// Resolve returns l with each unset field taken from defaults (and, should
// defaults leave one unset, from LimitsDefault).
func Resolve(defaults, l Limits) Resolved {
	d := LimitsDefault
	return Resolved{
		IngestRate:   pick(l.IngestRate, defaults.IngestRate, &d.IngestRate),
		IngestBurst:  pick(l.IngestBurst, defaults.IngestBurst, &d.IngestBurst),
		ProcessRate:  pick(l.ProcessRate, defaults.ProcessRate, &d.ProcessRate),
		ProcessBurst: pick(l.ProcessBurst, defaults.ProcessBurst, &d.ProcessBurst),
		Concurrency:  pick(l.Concurrency, defaults.Concurrency, &d.Concurrency),
		SoftBacklog:  pick(l.SoftBacklog, defaults.SoftBacklog, &d.SoftBacklog),
		MaxBacklog:   pick(l.MaxBacklog, defaults.MaxBacklog, &d.MaxBacklog),
		DropAge:      time.Duration(pick(l.DropAge, defaults.DropAge, new(Duration(d.DropAge)))),
	}
}

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

// LimitError is one problem with one limit of a tenant.
type LimitError struct {
	// Key is the limit's name in YAML and JSON ("ingest_rate").
	Key string
	// Reason says what is wrong.
	Reason string
}

// Error formats the problem as "ingest_rate: reason".
func (e *LimitError) Error() string { return e.Key + ": " + e.Reason }

// ValidateLimits checks the fields l sets, and that its soft backlog does
// not exceed its max backlog once resolved against defaults. It returns
// every problem, each a *LimitError, joined with errors.Join, so that the
// configuration file and the admin API name the keys alike.
func ValidateLimits(defaults, l Limits) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &LimitError{Key: key, Reason: fmt.Sprintf(format, args...)})
	}
	rate := func(name string, v *float64) {
		if v != nil && !(*v > 0 && !math.IsInf(*v, 0)) {
			bad(name, "must be a positive number of messages per second, got %v", *v)
		}
	}
	atLeast := func(name string, v *int, lowest int) {
		if v != nil && *v < lowest {
			bad(name, "must be at least %d, got %d", lowest, *v)
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
		bad("drop_age", "must not be negative, got %v", time.Duration(*l.DropAge))
	}
	if l.SoftBacklog != nil || l.MaxBacklog != nil {
		r := Resolve(defaults, l)
		if r.SoftBacklog > r.MaxBacklog {
			bad("soft_backlog", "%d exceeds max_backlog %d", r.SoftBacklog, r.MaxBacklog)
		}
	}
	return errors.Join(errs...)
}
