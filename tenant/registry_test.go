package tenant_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

func ptr[T any](v T) *T { return &v }

// fileTenants are the tenants of a configuration file: acme with a key and
// its own ingest rate, globex with two keys.
func fileTenants() []tenant.Spec {
	return []tenant.Spec{
		{ID: "acme", APIKeys: []string{tenant.HashKey("acme-key")}, Limits: tenant.Limits{IngestRate: ptr(500.0)}},
		{ID: "globex", APIKeys: []string{tenant.HashKey("globex-1"), tenant.HashKey("globex-2")}},
	}
}

func newRegistry(t *testing.T, cfg tenant.Config) *tenant.Registry {
	t.Helper()
	r, err := tenant.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r
}

func TestNewRejectsBadFiles(t *testing.T) {
	t.Parallel()
	good := tenant.HashKey("k")
	tests := []struct {
		name    string
		tenants []tenant.Spec
		want    string
	}{
		{"bad id", []tenant.Spec{{ID: "a b"}}, `id "a b"`},
		{"empty id", []tenant.Spec{{ID: ""}}, `id ""`},
		{"long id", []tenant.Spec{{ID: strings.Repeat("a", 65)}}, "id"},
		{"repeated id", []tenant.Spec{{ID: "a"}, {ID: "a"}}, `"a" defined twice`},
		{"key not hashed", []tenant.Spec{{ID: "a", APIKeys: []string{"plain-key"}}}, "sha256:"},
		{"upper hex", []tenant.Spec{{ID: "a", APIKeys: []string{strings.ToUpper(good)}}}, "sha256:"},
		{"short hex", []tenant.Spec{{ID: "a", APIKeys: []string{good[:70]}}}, "sha256:"},
		{"shared key", []tenant.Spec{{ID: "a", APIKeys: []string{good}}, {ID: "b", APIKeys: []string{good}}}, "also a key"},
		{"bad limit", []tenant.Spec{{ID: "a", Limits: tenant.Limits{IngestRate: ptr(-1.0)}}}, "ingest_rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := tenant.New(tenant.Config{Tenants: tt.tenants})
			if !errors.Is(err, tenant.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, tenant.Config{Tenants: fileTenants(), Defaults: tenant.Limits{IngestRate: ptr(50.0)}})
	tests := []struct {
		key      string
		want     string
		wantRate float64
	}{
		{"acme-key", "acme", 500},
		{"globex-1", "globex", 50},
		{"globex-2", "globex", 50},
		{"acme-key ", "", 0},
		{"ACME-KEY", "", 0},
		{"", "", 0},
		{tenant.HashKey("acme-key"), "", 0}, // the stored hash is not a key
		{strings.Repeat("k", tenant.MaxKeyLength+1), "", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%.20q", tt.key), func(t *testing.T) {
			got, err := r.Authenticate(tt.key)
			if tt.want == "" {
				if !errors.Is(err, tenant.ErrUnauthorized) {
					t.Fatalf("Authenticate: %+v, %v; want ErrUnauthorized", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tt.want || got.Limits.IngestRate != tt.wantRate {
				t.Errorf("Authenticate = %s at %v/s, want %s at %v/s", got.ID, got.Limits.IngestRate, tt.want, tt.wantRate)
			}
		})
	}
}

// admin runs the admin operations against a registry and checks what they
// leave; it runs in memory and on Redis.
func testAdmin(t *testing.T, cfg tenant.Config) {
	ctx := context.Background()
	cfg.Tenants = fileTenants()
	r := newRegistry(t, cfg)

	// A new tenant, with its own limits and no key.
	got, created, err := r.Put(ctx, "initech", tenant.Limits{IngestRate: ptr(7.0), IngestBurst: ptr(3)})
	if err != nil || !created {
		t.Fatalf("Put initech: created %v, %v", created, err)
	}
	if got.Limits.IngestRate != 7 || got.Limits.IngestBurst != 3 || got.FromConfig || len(got.Keys) != 0 {
		t.Errorf("Put initech = %+v", got)
	}
	kid, key, err := r.IssueKey(ctx, "initech")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "fq_") || len(key) != 46 || len(kid) != 16 {
		t.Errorf("IssueKey = %q, %q; want fq_ and 43 base64url characters, a 16-digit id", kid, key)
	}
	if a, err := r.Authenticate(key); err != nil || a.ID != "initech" {
		t.Fatalf("new key authenticates %+v, %v", a, err)
	}
	if tn, _ := r.Get("initech"); len(tn.Keys) != 1 || tn.Keys[0].ID != kid || tn.Keys[0].Hash != tenant.HashKey(key) || tn.Keys[0].CreatedAt.IsZero() {
		t.Errorf("stored keys %+v, want one with id %s, the key's hash and a date", tn.Keys, kid)
	}

	// Changing a tenant of the file keeps its keys.
	got, created, err = r.Put(ctx, "acme", tenant.Limits{MaxBacklog: ptr(2000)})
	if err != nil || created {
		t.Fatalf("Put acme: created %v, %v", created, err)
	}
	if got.FromConfig || got.Limits.MaxBacklog != 2000 || got.Overrides.IngestRate != nil {
		t.Errorf("Put acme = %+v; want a record replacing the file's limits", got)
	}
	if a, err := r.Authenticate("acme-key"); err != nil || a.ID != "acme" {
		t.Errorf("acme's key after Put: %+v, %v", a, err)
	}

	// Revoking a key of the file.
	acme, _ := r.Get("acme")
	if err := r.RevokeKey(ctx, "acme", acme.Keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Authenticate("acme-key"); !errors.Is(err, tenant.ErrUnauthorized) {
		t.Errorf("revoked key: %v, want ErrUnauthorized", err)
	}
	if err := r.RevokeKey(ctx, "acme", acme.Keys[0].ID); !errors.Is(err, tenant.ErrKeyNotFound) {
		t.Errorf("second revoke: %v, want ErrKeyNotFound", err)
	}

	// Deleting a tenant of the file leaves it deleted.
	if _, err := r.Delete(ctx, "globex", false); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Get("globex"); ok {
		t.Error("globex still there after Delete")
	}
	if _, err := r.Authenticate("globex-1"); !errors.Is(err, tenant.ErrUnauthorized) {
		t.Errorf("deleted tenant's key: %v", err)
	}
	for name, err := range map[string]error{
		"delete again":      func() error { _, err := r.Delete(ctx, "globex", false); return err }(),
		"delete unknown":    func() error { _, err := r.Delete(ctx, "nobody", true); return err }(),
		"issue for unknown": func() error { _, _, err := r.IssueKey(ctx, "globex"); return err }(),
		"revoke of unknown": r.RevokeKey(ctx, "nobody", "0123456789abcdef"),
	} {
		if !errors.Is(err, tenant.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	// Created again, it has no keys.
	if _, created, err := r.Put(ctx, "globex", tenant.Limits{}); err != nil || !created {
		t.Fatalf("Put globex again: created %v, %v", created, err)
	}
	if g, _ := r.Get("globex"); len(g.Keys) != 0 {
		t.Errorf("re-created globex has keys %+v", g.Keys)
	}

	// Invalid input.
	if _, _, err := r.Put(ctx, "a/b", tenant.Limits{}); !errors.Is(err, tenant.ErrInvalid) {
		t.Errorf("Put with a bad id: %v", err)
	}
	if _, _, err := r.Put(ctx, "x", tenant.Limits{SoftBacklog: ptr(10), MaxBacklog: ptr(5)}); !errors.Is(err, tenant.ErrInvalid) || !strings.Contains(err.Error(), "soft_backlog") {
		t.Errorf("Put with soft over max: %v", err)
	}

	var ids []string
	for _, tn := range r.List() {
		ids = append(ids, tn.ID)
	}
	if diff := cmp.Diff([]string{"acme", "globex", "initech"}, ids); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	// A registry started later over the same store sees the same tenants.
	if cfg.Redis != nil {
		again := newRegistry(t, cfg)
		if diff := cmp.Diff(r.List(), again.List()); diff != "" {
			t.Errorf("a new registry on the same Redis differs (-first +new):\n%s", diff)
		}
	}
}

func TestAdminInMemory(t *testing.T) {
	t.Parallel()
	testAdmin(t, tenant.Config{})
}

// onRedis runs test against one Redis node and against a Redis Cluster,
// each with a fresh key prefix.
func onRedis(t *testing.T, test func(t *testing.T, c redis.UniversalClient, prefix string)) {
	t.Helper()
	for _, topo := range testenv.RedisTopologies() {
		t.Run(topo.Name, func(t *testing.T) {
			t.Parallel()
			test(t, topo.Client(t), testenv.Prefix(t)+":")
		})
	}
}

func TestAdminOnRedis(t *testing.T) {
	t.Parallel()
	onRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		testAdmin(t, tenant.Config{Redis: c, Prefix: prefix})
	})
}

// TestChangesReachOtherProcesses: a change made on one registry is seen by
// another sharing the Redis within a second.
func TestChangesReachOtherProcesses(t *testing.T) {
	t.Parallel()
	onRedis(t, testChangesReachOtherProcesses)
}

func testChangesReachOtherProcesses(t *testing.T, c redis.UniversalClient, prefix string) {
	cfg := tenant.Config{Tenants: fileTenants(), Redis: c, Prefix: prefix}
	a, b := newRegistry(t, cfg), newRegistry(t, cfg)
	ctx := context.Background()

	changed := b.Changed()
	start := time.Now()
	_, key, err := a.IssueKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("the other registry did not see a new key within a second")
	}
	t.Logf("seen after %v", time.Since(start))
	if got, err := b.Authenticate(key); err != nil || got.ID != "acme" {
		t.Fatalf("other registry: %+v, %v", got, err)
	}

	changed = b.Changed()
	if _, err := a.Delete(ctx, "acme", false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("the other registry did not see a deletion within a second")
	}
	if _, err := b.Authenticate(key); !errors.Is(err, tenant.ErrUnauthorized) {
		t.Fatalf("deleted tenant's key on the other registry: %v", err)
	}
}

// TestConcurrentChanges: concurrent changes of one tenant through two
// registries all land.
func TestConcurrentChanges(t *testing.T) {
	t.Parallel()
	onRedis(t, testConcurrentChanges)
}

func testConcurrentChanges(t *testing.T, c redis.UniversalClient, prefix string) {
	cfg := tenant.Config{Tenants: fileTenants(), Redis: c, Prefix: prefix}
	regs := []*tenant.Registry{newRegistry(t, cfg), newRegistry(t, cfg)}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		keys []string
	)
	for i := range 10 {
		wg.Go(func() {
			_, key, err := regs[i%2].IssueKey(context.Background(), "globex")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := regs[0].Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(keys, "globex-1", "globex-2") {
		if _, err := regs[0].Authenticate(k); err != nil {
			t.Errorf("a key issued concurrently is lost: %v", err)
		}
	}
}

func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	reg := prometheus.NewRegistry()
	redisMetrics, err := degrade.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r := newRegistry(t, tenant.Config{Tenants: fileTenants(), Redis: c, RedisMetrics: redisMetrics,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if got, err := r.Authenticate("acme-key"); err != nil || got.ID != "acme" {
		t.Fatalf("file tenants while Redis is down: %+v, %v", got, err)
	}
	if _, _, err := r.Put(context.Background(), "acme", tenant.Limits{}); !errors.Is(err, tenant.ErrUnavailable) {
		t.Fatalf("Put while Redis is down: %v, want ErrUnavailable", err)
	}
	want := `
# HELP fairq_redis_degraded 1 while a component cannot reach Redis and runs on local state or refuses, by component.
# TYPE fairq_redis_degraded gauge
fairq_redis_degraded{component="tenants"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fairq_redis_degraded"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(redisMetrics.FallbackFor("tenants")); n < 1 {
		t.Errorf("fairq_redis_fallback_total{component=tenants} = %v after a failed load, want at least 1", n)
	}
	if n := strings.Count(logs.String(), "redis unreachable; serving the tenant records last loaded"); n != 1 {
		t.Errorf("%d log lines about the outage, want 1:\n%s", n, logs.String())
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	// issued is as long as the keys the admin API issues.
	const issued = "fq_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	r, err := tenant.New(tenant.Config{Tenants: append(fileTenants(), tenant.Spec{ID: "issued", APIKeys: []string{tenant.HashKey(issued)}})})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Authenticate("acme-key"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hit issued key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Authenticate(issued); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Authenticate("not-a-key"); err == nil {
				b.Fatal("authenticated")
			}
		}
	})
}

func ExampleHashKey() {
	fmt.Println(tenant.HashKey("secret"))
	// Output:
	// sha256:2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b
}
