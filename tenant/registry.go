package tenant

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/lifecycle"
)

// Spec is a tenant as the configuration file defines it (config.Tenant
// converts to it): the registry starts from these.
type Spec struct {
	ID      string
	APIKeys []string // "sha256:<64 lowercase hex>" each
	Limits           // over Config.Defaults
}

// Config configures a Registry.
type Config struct {
	// Tenants are the tenants of the configuration file.
	Tenants []Spec
	// Defaults are the limits of a tenant that sets none; unset fields
	// take LimitsDefault's.
	Defaults Limits
	// Redis, when set, holds the records of the admin API for the whole
	// fleet; nil keeps them in this process.
	Redis redis.UniversalClient
	// Prefix goes in front of every Redis key ("fairq:").
	Prefix string
	// Refresh is how often the Redis version counter is polled; zero uses
	// RefreshDefault.
	Refresh time.Duration
	// Logger receives lines about Redis going away and coming back; nil
	// discards.
	Logger *slog.Logger
	// Registerer receives fairq_tenants; nil registers nothing.
	Registerer prometheus.Registerer
	// RedisMetrics are the process's fairq_redis_degraded and
	// fairq_redis_fallback_total (degrade.NewMetrics), which the series of
	// component="tenants" join; nil keeps them registered nowhere.
	RedisMetrics *degrade.Metrics
	// Now is the clock that dates keys and records; nil uses time.Now.
	Now func() time.Time
}

// RefreshDefault is Config.Refresh's default: a change made on one process
// is seen by all within a second.
const RefreshDefault = 500 * time.Millisecond

func (c Config) withDefaults() Config {
	c.Refresh = cmp.Or(c.Refresh, RefreshDefault)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Registry holds the tenants and authenticates API keys. It is safe for
// concurrent use; reads never wait for Redis.
type Registry struct {
	cfg   Config
	file  map[string]Spec
	store store
	snap  atomic.Pointer[snapshot]
	count prometheus.Gauge
	redis *degrade.Dependency

	reload sync.Mutex // one reload at a time

	loops lifecycle.Loops
}

// snapshot is an immutable view of the registry.
type snapshot struct {
	version int64
	tenants map[string]*Tenant
	// purged holds the purge instants of deleted tenants, whose messages
	// may still be on the queues.
	purged  map[string]time.Time
	byHash  map[[32]byte]*keyEntry
	changed chan struct{} // closed when a newer snapshot replaces this one
}

type keyEntry struct {
	hash   [32]byte
	tenant *Tenant
}

// New returns a registry holding the tenants of the file. It fails when a
// tenant id, a key hash or a limit of the file is invalid, an id repeats or
// a key belongs to two tenants. Call Start before serving so that the
// records of the admin API are loaded.
func New(cfg Config) (*Registry, error) {
	cfg = cfg.withDefaults()
	r := &Registry{
		cfg:  cfg,
		file: make(map[string]Spec, len(cfg.Tenants)),
	}
	for _, t := range cfg.Tenants {
		if err := checkID(t.ID); err != nil {
			return nil, err
		}
		if _, dup := r.file[t.ID]; dup {
			return nil, fmt.Errorf("%w: tenant %q defined twice", ErrInvalid, t.ID)
		}
		if err := ValidateLimits(cfg.Defaults, t.Limits); err != nil {
			return nil, fmt.Errorf("%w: tenant %q: %w", ErrInvalid, t.ID, err)
		}
		for _, k := range t.APIKeys {
			if _, err := parseHash(k); err != nil {
				return nil, fmt.Errorf("tenant %q: %w", t.ID, err)
			}
		}
		r.file[t.ID] = t
	}
	if cfg.Redis != nil {
		r.store = &redisStore{c: cfg.Redis, keys: newRedisKeys(cfg.Prefix)}
	} else {
		r.store = newMemStore()
	}
	s, err := r.build(0, nil, true)
	if err != nil {
		return nil, err
	}
	r.snap.Store(s)
	if err := r.metrics(); err != nil {
		return nil, err
	}
	r.count.Set(float64(len(s.tenants)))
	return r, nil
}

func (r *Registry) metrics() error {
	r.count = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fairq_tenants", Help: "Tenants in the registry."})
	if reg := r.cfg.Registerer; reg != nil {
		if err := reg.Register(r.count); err != nil {
			return err
		}
	}
	r.redis = degrade.New(degrade.Config{
		Component: "tenants",
		Metrics:   r.cfg.RedisMetrics,
		Logger:    r.cfg.Logger,
		Down:      "redis unreachable; serving the tenant records last loaded",
		Up:        "redis is back; tenant records are current again",
	})
	return nil
}

// Start loads the stored records and, with Redis, polls for changes until
// Stop: ctx bounds the first load and otherwise only carries values (see
// package lifecycle). If Redis cannot be reached, the registry starts
// from the file and keeps trying.
func (r *Registry) Start(ctx context.Context) error {
	loopCtx, err := r.loops.Start(ctx)
	if err != nil {
		return fmt.Errorf("tenant: registry: %w", err)
	}
	err = r.Reload(ctx)
	if err != nil && !errors.Is(err, ErrUnavailable) {
		return err
	}
	r.health(ctx, err)
	if r.cfg.Redis != nil {
		r.loops.Go(func() { r.poll(loopCtx) })
	}
	return nil
}

// Stop ends the polling and waits for it. It is idempotent.
func (r *Registry) Stop(ctx context.Context) error { return r.loops.Stop(ctx) }

func (r *Registry) poll(ctx context.Context) {
	t := time.NewTicker(r.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, r.cfg.Refresh)
		v, err := r.store.version(pctx)
		if err == nil && v != r.snap.Load().version {
			err = r.Reload(pctx)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.health(ctx, err)
	}
}

// health records whether Redis answered the latest load or poll; each
// that failed is counted as an answer from the records last loaded.
func (r *Registry) health(ctx context.Context, err error) {
	if err == nil {
		r.redis.OK(ctx)
		return
	}
	r.redis.Fallback()
	r.redis.Failed(ctx, err)
}

// Reload loads the stored records now. The poll calls it when the version
// moves; a change made through this registry calls it itself.
func (r *Registry) Reload(ctx context.Context) error {
	r.reload.Lock()
	defer r.reload.Unlock()
	v, recs, err := r.store.load(ctx)
	if err != nil {
		return err
	}
	s, err := r.build(v, recs, false)
	if err != nil {
		return err
	}
	old := r.snap.Swap(s)
	close(old.changed)
	r.count.Set(float64(len(s.tenants)))
	return nil
}

// build makes a snapshot of the file overlaid with the records. A key held
// by two tenants is an error when strict, else it stays with the first
// tenant by id and the other loses it.
func (r *Registry) build(version int64, recs map[string]record, strict bool) (*snapshot, error) {
	s := &snapshot{
		version: version,
		tenants: make(map[string]*Tenant, len(r.file)+len(recs)),
		byHash:  make(map[[32]byte]*keyEntry),
		purged:  make(map[string]time.Time),
		changed: make(chan struct{}),
	}
	for id, ft := range r.file {
		if _, ok := recs[id]; ok {
			continue
		}
		t := &Tenant{ID: id, Limits: Resolve(r.cfg.Defaults, ft.Limits), Overrides: ft.Limits, FromConfig: true}
		for _, h := range ft.APIKeys {
			sum, _ := parseHash(h) // checked in New
			t.Keys = append(t.Keys, Key{ID: idOf(sum), Hash: h})
		}
		s.tenants[id] = t
	}
	for id, rec := range recs {
		if rec.Deleted {
			if rec.PurgedBefore != 0 {
				s.purged[id] = time.UnixMilli(rec.PurgedBefore).UTC()
			}
			continue
		}
		l := rec.Limits
		t := &Tenant{ID: id, Limits: Resolve(r.cfg.Defaults, l), Overrides: l, State: rec.state()}
		for _, k := range rec.Keys {
			key := Key{ID: k.ID, Hash: k.Hash}
			if k.Created != 0 {
				key.CreatedAt = time.UnixMilli(k.Created).UTC()
			}
			t.Keys = append(t.Keys, key)
		}
		s.tenants[id] = t
	}
	ids := slices.Sorted(maps.Keys(s.tenants))
	for _, id := range ids {
		t := s.tenants[id]
		for _, k := range t.Keys {
			sum, err := parseHash(k.Hash)
			if err != nil {
				return nil, fmt.Errorf("tenant %q: key %s: %w", t.ID, k.ID, err)
			}
			if other, dup := s.byHash[sum]; dup {
				if strict {
					return nil, fmt.Errorf("%w: a key of tenant %q is also a key of tenant %q", ErrInvalid, t.ID, other.tenant.ID)
				}
				r.cfg.Logger.Error("an API key belongs to two tenants; it stays with the first", "tenant", other.tenant.ID, "other", t.ID, "key_id", k.ID)
				continue
			}
			s.byHash[sum] = &keyEntry{hash: sum, tenant: t}
		}
	}
	return s, nil
}

// Authenticate returns the tenant whose API key this is, or
// ErrUnauthorized.
func (r *Registry) Authenticate(key string) (Tenant, error) {
	if key == "" || len(key) > MaxKeyLength {
		return Tenant{}, ErrUnauthorized
	}
	// Hashed from a copy on the stack: []byte(key) would allocate for
	// keys longer than 32 bytes.
	var buf [128]byte
	var sum [32]byte
	if len(key) <= len(buf) {
		sum = sha256.Sum256(buf[:copy(buf[:], key)])
	} else {
		sum = sha256.Sum256([]byte(key))
	}
	e := r.snap.Load().byHash[sum]
	if e == nil || subtle.ConstantTimeCompare(e.hash[:], sum[:]) != 1 {
		return Tenant{}, ErrUnauthorized
	}
	return *e.tenant, nil
}

// Get returns a tenant.
func (r *Registry) Get(id string) (Tenant, bool) {
	t, ok := r.snap.Load().tenants[id]
	if !ok {
		return Tenant{}, false
	}
	return clone(t), true
}

// Limits returns a tenant's limits resolved over the defaults, without
// the copy of its keys that Get makes: the worker asks for every message.
func (r *Registry) Limits(id string) (Resolved, bool) {
	t, ok := r.snap.Load().tenants[id]
	if !ok {
		return Resolved{}, false
	}
	return t.Limits, true
}

// List returns every tenant, by id.
func (r *Registry) List() []Tenant {
	s := r.snap.Load()
	out := make([]Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, clone(t))
	}
	slices.SortFunc(out, func(a, b Tenant) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// StateOf returns the state of a tenant: its pause and purge instant, or,
// for a deleted tenant, the purge instant its deletion recorded (known is
// false). The worker asks for every message: it copies nothing.
func (r *Registry) StateOf(id string) (st State, known bool) {
	s := r.snap.Load()
	if t, ok := s.tenants[id]; ok {
		return t.State, true
	}
	return State{PurgedBefore: s.purged[id]}, false
}

// Len returns the number of tenants.
func (r *Registry) Len() int { return len(r.snap.Load().tenants) }

// Changed returns a channel closed at the next change this registry sees.
func (r *Registry) Changed() <-chan struct{} { return r.snap.Load().changed }

func clone(t *Tenant) Tenant {
	c := *t
	c.Keys = slices.Clone(t.Keys)
	return c
}

// Put sets a tenant's own limits (nil fields follow the defaults), creating
// the tenant if it does not exist; created says which. Its keys are kept.
func (r *Registry) Put(ctx context.Context, id string, limits Limits) (t Tenant, created bool, err error) {
	if err := checkID(id); err != nil {
		return Tenant{}, false, err
	}
	if err := ValidateLimits(r.cfg.Defaults, limits); err != nil {
		return Tenant{}, false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	err = r.update(ctx, id, func(rec *record, exists bool) error {
		created = !exists
		rec.Limits = limits
		return nil
	})
	if err != nil {
		return Tenant{}, false, err
	}
	t, _ = r.Get(id)
	return t, created, nil
}

// Delete deletes a tenant and with it its keys. With purge it also
// records a purge instant, now, which it returns: the tenant's messages
// still on the queues are deleted unseen, and never delivered.
func (r *Registry) Delete(ctx context.Context, id string, purge bool) (time.Time, error) {
	now := r.cfg.Now()
	err := r.update(ctx, id, func(rec *record, exists bool) error {
		if !exists {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		purged := rec.PurgedBefore
		if purge {
			purged = now.UnixMilli()
		}
		*rec = record{Deleted: true, PurgedBefore: purged}
		return nil
	})
	if err != nil || !purge {
		return time.Time{}, err
	}
	return time.UnixMilli(now.UnixMilli()).UTC(), nil
}

// Pause holds a tenant's messages unstarted until Resume; with ingest it
// also refuses the tenant's new messages at the front door. It returns the
// tenant as it is now.
func (r *Registry) Pause(ctx context.Context, id string, ingest bool) (Tenant, error) {
	return r.setState(ctx, id, func(rec *record) { rec.Paused, rec.PauseIngest = true, ingest })
}

// Resume lets a paused tenant's messages start again.
func (r *Registry) Resume(ctx context.Context, id string) (Tenant, error) {
	return r.setState(ctx, id, func(rec *record) { rec.Paused, rec.PauseIngest = false, false })
}

// Purge records a purge instant, now, which it returns: every message of
// the tenant enqueued before it is deleted unseen by the worker that next
// receives it.
func (r *Registry) Purge(ctx context.Context, id string) (time.Time, error) {
	now := time.UnixMilli(r.cfg.Now().UnixMilli()).UTC()
	_, err := r.setState(ctx, id, func(rec *record) { rec.PurgedBefore = now.UnixMilli() })
	return now, err
}

func (r *Registry) setState(ctx context.Context, id string, change func(rec *record)) (Tenant, error) {
	err := r.update(ctx, id, func(rec *record, exists bool) error {
		if !exists {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		change(rec)
		return nil
	})
	if err != nil {
		return Tenant{}, err
	}
	t, _ := r.Get(id)
	return t, nil
}

// IssueKey makes a new API key for a tenant and returns it with its id.
// The key is not kept: this is the only time it is seen.
func (r *Registry) IssueKey(ctx context.Context, id string) (kid, key string, err error) {
	key = newKey()
	sum := sha256.Sum256([]byte(key))
	kid = idOf(sum)
	err = r.update(ctx, id, func(rec *record, exists bool) error {
		switch {
		case !exists:
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		case len(rec.Keys) >= MaxKeys:
			return fmt.Errorf("%w: tenant %q has %d", ErrTooManyKeys, id, len(rec.Keys))
		}
		rec.Keys = append(rec.Keys, keyRecord{ID: kid, Hash: HashKey(key), Created: r.cfg.Now().UnixMilli()})
		return nil
	})
	if err != nil {
		return "", "", err
	}
	return kid, key, nil
}

// RevokeKey removes one API key of a tenant.
func (r *Registry) RevokeKey(ctx context.Context, id, keyID string) error {
	return r.update(ctx, id, func(rec *record, exists bool) error {
		if !exists {
			return fmt.Errorf("%w: %q", ErrNotFound, id)
		}
		i := slices.IndexFunc(rec.Keys, func(k keyRecord) bool { return k.ID == keyID })
		if i < 0 {
			return fmt.Errorf("%w: tenant %q has no key %q", ErrKeyNotFound, id, keyID)
		}
		rec.Keys = slices.Delete(rec.Keys, i, i+1)
		return nil
	})
}

// maxConflicts bounds the retries of an update that keeps meeting
// concurrent ones.
const maxConflicts = 10

// update applies change to a tenant's record, starting from the file's
// definition when there is no record yet, and stores it over the revision
// it read; exists says whether the tenant exists before the change.
func (r *Registry) update(ctx context.Context, id string, change func(rec *record, exists bool) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	for range maxConflicts {
		cur, err := r.store.get(ctx, id)
		if err != nil {
			return err
		}
		rec, exists := cur.rec, cur.found && !cur.rec.Deleted
		if !cur.found {
			if ft, ok := r.file[id]; ok {
				rec, exists = r.fromFile(ft), true
			}
		}
		if cur.found && cur.rec.Deleted {
			// Created again: the purge instant of the deletion stays, so
			// that the old tenant's messages are not the new one's.
			rec = record{PurgedBefore: cur.rec.PurgedBefore}
		}
		rec.Keys = slices.Clone(rec.Keys)
		if err := change(&rec, exists); err != nil {
			return err
		}
		rec.Updated = r.cfg.Now().UnixMilli()
		ok, err := r.store.put(ctx, id, cur.rev, rec)
		if err != nil {
			return err
		}
		if ok {
			// Stored; should the reload fail, the poll brings it.
			if err := r.Reload(ctx); err != nil {
				r.cfg.Logger.Warn("tenant change stored but not reloaded", "tenant", id, "err", err)
			}
			return nil
		}
	}
	return fmt.Errorf("tenant %q: %d concurrent changes in a row; try again", id, maxConflicts)
}

// fromFile returns the record equal to a tenant of the file.
func (r *Registry) fromFile(ft Spec) record {
	rec := record{Limits: ft.Limits}
	for _, h := range ft.APIKeys {
		sum, _ := parseHash(h)
		rec.Keys = append(rec.Keys, keyRecord{ID: idOf(sum), Hash: h})
	}
	return rec
}
