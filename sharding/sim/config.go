package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fairq/fairq/sharding"
)

// Strategy is how a message's queue is chosen.
type Strategy int

// The strategies, in the order they are reported.
const (
	Shared          Strategy = iota // one queue for every tenant
	Hash                            // one queue per tenant, by hash
	ShardRandom                     // a random queue of the tenant's shard
	ShardShallowest                 // the shallowest queue of the tenant's shard
)

// Strategies lists every strategy.
var Strategies = []Strategy{Shared, Hash, ShardRandom, ShardShallowest}

var strategyNames = [...]string{"shared", "hash", "shard-random", "shard-shallowest"}

var strategyTitles = [...]string{"one shared queue", "hash to one queue", "shuffle shard, random queue", "shuffle shard, shallowest queue"}

func (s Strategy) String() string {
	if s < 0 || int(s) >= len(strategyNames) {
		return fmt.Sprintf("Strategy(%d)", int(s))
	}
	return strategyNames[s]
}

// Title is the strategy's name for people.
func (s Strategy) Title() string {
	if s < 0 || int(s) >= len(strategyTitles) {
		return s.String()
	}
	return strategyTitles[s]
}

// ParseStrategies parses a comma-separated list of strategy names.
func ParseStrategies(s string) ([]Strategy, error) {
	var out []Strategy
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for i, n := range strategyNames {
			if n == name {
				out = append(out, Strategy(i))
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: unknown strategy %q (want %s)", ErrInvalidConfig, name, strings.Join(strategyNames[:], ", "))
		}
	}
	return out, nil
}

// Service time distributions.
const (
	ServiceExp   = "exp"   // exponential with mean Config.Service
	ServiceFixed = "fixed" // always Config.Service
)

// Defaults of Config: the headline experiment.
const (
	QueuesDefault      = 8
	ShardSizeDefault   = 2
	QuietDefault       = 20
	NoisyDefault       = 1
	QuietRateDefault   = 10.0 // messages/s per quiet tenant
	NoisyFactorDefault = 100.0
	CapacityDefault    = 2.0 // consumer capacity ÷ total quiet rate
	ServiceDefault     = 100 * time.Millisecond
	DurationDefault    = 10 * time.Minute
	PollDefault        = time.Second
	HurtDefault        = 1.2
	WindowsDefault     = 10
	SeedDefault        = 1
)

// ErrInvalidConfig is returned by Run for a Config it cannot simulate.
var ErrInvalidConfig = errors.New("invalid simulation config")

// Config describes one experiment. Zero fields take the defaults above.
type Config struct {
	Seed        uint64
	Queues      int     // N
	ShardSize   int     // k
	Quiet       int     // number of quiet tenants
	Noisy       int     // number of noisy tenants
	QuietRate   float64 // messages/s of each quiet tenant
	NoisyFactor float64 // each noisy tenant's rate ÷ QuietRate
	// Capacity is the consumers' capacity as a multiple of the total quiet
	// rate; the fleet has round(Capacity × Quiet × QuietRate × Service)
	// slots.
	Capacity    float64
	Service     time.Duration // mean service time of a message
	ServiceDist string        // ServiceExp or ServiceFixed
	Duration    time.Duration // simulated time over which tenants send
	Poll        time.Duration // depth reading interval of shard-shallowest
	Hurt        float64       // p99 ratio over baseline past which a tenant is hurt
	Windows     int           // time windows of the latency-over-time report
	Strategies  []Strategy
}

func (c Config) withDefaults() Config {
	c.Seed = cmp.Or(c.Seed, SeedDefault)
	c.Queues = cmp.Or(c.Queues, QueuesDefault)
	c.ShardSize = cmp.Or(c.ShardSize, ShardSizeDefault)
	c.Quiet = cmp.Or(c.Quiet, QuietDefault)
	c.Noisy = cmp.Or(c.Noisy, NoisyDefault)
	c.QuietRate = cmp.Or(c.QuietRate, QuietRateDefault)
	c.NoisyFactor = cmp.Or(c.NoisyFactor, NoisyFactorDefault)
	c.Capacity = cmp.Or(c.Capacity, CapacityDefault)
	c.Service = cmp.Or(c.Service, ServiceDefault)
	c.ServiceDist = cmp.Or(c.ServiceDist, ServiceExp)
	c.Duration = cmp.Or(c.Duration, DurationDefault)
	c.Poll = cmp.Or(c.Poll, PollDefault)
	c.Hurt = cmp.Or(c.Hurt, HurtDefault)
	c.Windows = cmp.Or(c.Windows, WindowsDefault)
	if len(c.Strategies) == 0 {
		c.Strategies = Strategies
	}
	return c
}

func (c Config) validate() error {
	if _, err := sharding.NewPool(c.Queues, c.ShardSize); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Quiet < 1:
		return fmt.Errorf("%w: %d quiet tenants, want at least 1", ErrInvalidConfig, c.Quiet)
	case c.Noisy < 1:
		return fmt.Errorf("%w: %d noisy tenants, want at least 1", ErrInvalidConfig, c.Noisy)
	case !(c.QuietRate > 0) || math.IsInf(c.QuietRate, 0):
		return fmt.Errorf("%w: quiet rate %v", ErrInvalidConfig, c.QuietRate)
	case !(c.NoisyFactor > 0) || math.IsInf(c.NoisyFactor, 0):
		return fmt.Errorf("%w: noisy factor %v", ErrInvalidConfig, c.NoisyFactor)
	case !(c.Capacity > 0):
		return fmt.Errorf("%w: capacity %v", ErrInvalidConfig, c.Capacity)
	case c.Service <= 0 || c.Duration <= 0 || c.Poll <= 0:
		return fmt.Errorf("%w: service %v, duration %v, poll %v: want positive", ErrInvalidConfig, c.Service, c.Duration, c.Poll)
	case c.ServiceDist != ServiceExp && c.ServiceDist != ServiceFixed:
		return fmt.Errorf("%w: service distribution %q, want %q or %q", ErrInvalidConfig, c.ServiceDist, ServiceExp, ServiceFixed)
	case !(c.Hurt > 0):
		return fmt.Errorf("%w: hurt ratio %v", ErrInvalidConfig, c.Hurt)
	case c.Windows < 2:
		return fmt.Errorf("%w: %d windows, want at least 2", ErrInvalidConfig, c.Windows)
	case c.workers() < 1:
		return fmt.Errorf("%w: capacity %v gives no consumer", ErrInvalidConfig, c.Capacity)
	}
	if n := c.expectedMessages(); n > 50_000_000 {
		return fmt.Errorf("%w: about %.0f messages per run, want at most 50 million", ErrInvalidConfig, n)
	}
	return nil
}

// workers is the number of consumer slots.
func (c Config) workers() int {
	return int(math.Round(c.Capacity * float64(c.Quiet) * c.QuietRate * c.Service.Seconds()))
}

// expectedMessages is the mean number of messages of a run with the noisy
// tenants.
func (c Config) expectedMessages() float64 {
	return (float64(c.Quiet) + float64(c.Noisy)*c.NoisyFactor) * c.QuietRate * c.Duration.Seconds()
}
