package throttle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
)

// MeterEveryDefault is RedisMeterConfig.Every's default.
const MeterEveryDefault = 500 * time.Millisecond

// RedisMeterConfig configures a RedisMeter.
type RedisMeterConfig struct {
	// Client is the Redis connection; required.
	Client redis.UniversalClient
	// Prefix goes in front of every key, as in RedisConfig.
	Prefix string
	// Window is the time constant of the moving average; required.
	Window time.Duration
	// Every is how often the events marked here are sent and the rates
	// asked about are read; zero uses MeterEveryDefault.
	Every time.Duration
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total; nil keeps the meter's registered nowhere.
	RedisMetrics *degrade.Metrics
	// Component labels the metrics and log lines; required.
	Component string
	// Logger receives one line when Redis fails and one when it is back;
	// nil discards.
	Logger *slog.Logger
	// Now is the clock of the answers' age; nil uses time.Now.
	Now func() time.Time
}

// RedisMeter measures how fast events of a key come across every process
// sharing the Redis: a moving average of events a second with time
// constant Window, kept in Redis on Redis's clock, and when the latest
// came. MarkAt counts an event here; every Every the events counted are
// added, in one round trip for all the keys, and the rates of the keys
// asked about within the last Window are read back. So MarkAt costs no
// round trip, and an answer is at most Every (and the round trip) old.
//
// Its cost in Redis grows with the keys marked or asked about per Every
// and the processes; with Redis unreachable, the events of an Every are
// lost and the answers lapse (Rate's ok is false), so that the caller
// falls back to what it sees itself.
type RedisMeter struct {
	cfg   RedisMeterConfig
	dep   *degrade.Dependency
	loops lifecycle.Loops

	mu      sync.Mutex
	pending map[string]float64      // events marked since the last send, each weighted by its age
	asked   map[string]time.Time    // when each key was last asked about or marked
	rates   map[string]meterReading // as last read
}

// meterReading is a key's rate and its latest event as read at at.
type meterReading struct {
	perSecond float64
	since     time.Duration // from the latest event to the read
	at        time.Time
}

// NewRedisMeter returns a RedisMeter; Start begins its sends and reads.
func NewRedisMeter(cfg RedisMeterConfig) (*RedisMeter, error) {
	if cfg.Client == nil {
		return nil, errors.New("throttle: RedisMeterConfig.Client is required")
	}
	if cfg.Window <= 0 {
		return nil, errors.New("throttle: RedisMeterConfig.Window must be positive")
	}
	if cfg.Component == "" {
		return nil, errors.New("throttle: RedisMeterConfig.Component is required")
	}
	cfg.Every = cmp.Or(cfg.Every, MeterEveryDefault)
	if cfg.Every < 0 {
		return nil, errors.New("throttle: RedisMeterConfig.Every must not be negative")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &RedisMeter{
		cfg: cfg,
		dep: degrade.New(degrade.Config{
			Component: cfg.Component, Metrics: cfg.RedisMetrics, Logger: cfg.Logger, Now: cfg.Now,
			Down: "rates measured across the fleet are unknown until it is back: each process goes by what it sees",
			Up:   "rates measured across the fleet again",
		}),
		pending: make(map[string]float64),
		asked:   make(map[string]time.Time),
		rates:   make(map[string]meterReading),
	}, nil
}

// Start sends and reads every Every until Stop.
func (m *RedisMeter) Start(ctx context.Context) error {
	ctx, err := m.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("throttle: meter: %w", err)
	}
	m.loops.Go(func() {
		t := time.NewTicker(m.cfg.Every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m.sync(ctx)
			}
		}
	})
	return nil
}

// Stop ends the sends and reads; the events marked since the last send
// are not sent.
func (m *RedisMeter) Stop(ctx context.Context) error { return m.loops.Stop(ctx) }

// MarkAt counts one event of key that happened at at, sent with the next
// sync: as much of one as the moving average has left of an event that
// old (none of one more than a few Windows old). So events seen late in a
// burst, such as messages received at once after waiting on a queue, count
// at the rate they happened, not at the rate they were seen. The zero
// time counts as now.
func (m *RedisMeter) MarkAt(key string, at time.Time) {
	now := m.cfg.Now()
	w := 1.0
	if ago := now.Sub(at); ago > 0 && !at.IsZero() {
		w = math.Exp(-ago.Seconds() / m.cfg.Window.Seconds())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending[key] += w
	m.asked[key] = now
}

// Rate returns key's rate across the fleet, events a second, and how long
// ago its latest event came, as of now. ok is false until the key's rate
// was read once after the first time it is asked about or marked here,
// and when the last read is older than two Windows (Redis unreachable).
func (m *RedisMeter) Rate(key string) (perSecond float64, since time.Duration, ok bool) {
	now := m.cfg.Now()
	m.mu.Lock()
	m.asked[key] = now
	r, ok := m.rates[key]
	m.mu.Unlock()
	age := now.Sub(r.at)
	if !ok || age > 2*m.cfg.Window {
		if m.dep.Down() {
			m.dep.Fallback()
		}
		return 0, 0, false
	}
	since = r.since
	if since < math.MaxInt64-age {
		since += age
	}
	return r.perSecond * math.Exp(-age.Seconds()/m.cfg.Window.Seconds()), since, true
}

// meterScript: KEYS[1] a key's hash of rate (events a second), at (unix
// µs, Redis's clock, of rate) and last (unix µs of the latest event);
// ARGV the events to add (each weighted by its age, so a fraction may
// come) and the time constant in µs. It returns the
// rate as of now, with the events added, and the µs since the latest
// event (-1 for none), as strings. The hash lives four time constants
// after its latest event.
var meterScript = redis.NewScript(`
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', KEYS[1], 'rate', 'at', 'last')
local rate = tonumber(v[1]) or 0
local at = tonumber(v[2]) or now
local last = tonumber(v[3])
local tau = tonumber(ARGV[2])
rate = rate * math.exp(-math.max(now - at, 0) / tau)
local n = tonumber(ARGV[1])
if n > 0 then
  rate = rate + n * 1000000 / tau
  last = now
  redis.call('HSET', KEYS[1], 'rate', tostring(rate), 'at', tostring(now), 'last', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.floor(4 * tau / 1000) + 1)
end
local since = -1
if last then
  since = now - last
end
return {tostring(rate), tostring(since)}
`)

// sync sends the events marked since the last sync and reads the rates
// of the keys asked about or marked within the last Window, in one
// pipeline. Keys not asked about for longer are forgotten.
func (m *RedisMeter) sync(ctx context.Context) {
	now := m.cfg.Now()
	m.mu.Lock()
	pending := m.pending
	m.pending = make(map[string]float64, len(pending))
	if m.dep.Resting() {
		// Lost, as those of a failed send are: sent late, they would
		// count as events of now.
		m.mu.Unlock()
		return
	}
	keys := make([]string, 0, len(m.asked))
	for k, at := range m.asked {
		if now.Sub(at) > m.cfg.Window {
			delete(m.asked, k)
			delete(m.rates, k)
			continue
		}
		keys = append(keys, k)
	}
	m.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	tau := m.cfg.Window.Microseconds()
	// EVAL, not EVALSHA: a pipeline cannot fall back to EVAL when the
	// script is not cached (after a restart or a failover).
	cmds := make([]*redis.Cmd, len(keys))
	_, err := m.cfg.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = meterScript.Eval(ctx, p, []string{redisMeterKey(m.cfg.Prefix, k)}, pending[k], tau)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			m.dep.Failed(ctx, err)
		}
		return
	}
	m.dep.OK(ctx)
	read := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, k := range keys {
		r, err := meterReadingOf(cmds[i], read)
		if err != nil {
			continue
		}
		m.rates[k] = r
	}
}

// meterReadingOf parses meterScript's answer.
func meterReadingOf(c *redis.Cmd, at time.Time) (meterReading, error) {
	v, err := c.StringSlice()
	if err != nil {
		return meterReading{}, err
	}
	if len(v) != 2 {
		return meterReading{}, fmt.Errorf("meter: %d values, want 2", len(v))
	}
	rate, err := strconv.ParseFloat(v[0], 64)
	if err != nil {
		return meterReading{}, err
	}
	us, err := strconv.ParseFloat(v[1], 64)
	if err != nil {
		return meterReading{}, err
	}
	since := time.Duration(math.MaxInt64)
	if us >= 0 {
		since = time.Duration(us) * time.Microsecond
	}
	return meterReading{perSecond: rate, since: since, at: at}, nil
}
