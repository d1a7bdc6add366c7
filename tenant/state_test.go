package tenant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/tenant"
)

func TestStateInMemory(t *testing.T) {
	t.Parallel()
	testState(t, func(now func() time.Time) tenant.Config { return tenant.Config{Tenants: fileTenants(), Now: now} })
}

func TestStateOnRedis(t *testing.T) {
	t.Parallel()
	onRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		testState(t, func(now func() time.Time) tenant.Config {
			return tenant.Config{Tenants: fileTenants(), Redis: c, Prefix: prefix, Now: now}
		})
	})
}

// testState: pause, resume, purge and delete with purge, on a tenant of
// the file; a deleted tenant keeps its purge instant, also when created
// again; other tenants are not touched.
func testState(t *testing.T, cfgAt func(now func() time.Time) tenant.Config) {
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	r := newRegistry(t, cfgAt(func() time.Time { return now }))

	st := func(id string) tenant.State {
		t.Helper()
		s, _ := r.StateOf(id)
		return s
	}
	got, err := r.Pause(ctx, "acme", true)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Paused || !got.PauseIngest || !st("acme").Paused {
		t.Errorf("after Pause(ingest): %+v, state %+v", got.State, st("acme"))
	}
	if (st("globex") != tenant.State{}) {
		t.Errorf("another tenant's state changed: %+v", st("globex"))
	}
	if got.Limits.IngestRate != 500 || len(got.Keys) != 1 {
		t.Errorf("pausing lost the file's limits or keys: %+v", got)
	}
	if got, err := r.Pause(ctx, "acme", false); err != nil || !got.Paused || got.PauseIngest {
		t.Errorf("Pause(no ingest) = %+v, %v", got.State, err)
	}
	if got, err := r.Resume(ctx, "acme"); err != nil || got.Paused || got.PauseIngest {
		t.Errorf("Resume = %+v, %v", got.State, err)
	}

	at, err := r.Purge(ctx, "acme")
	if err != nil || !at.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("Purge = %v, %v; want now to the millisecond", at, err)
	}
	if got := st("acme").PurgedBefore; !got.Equal(at) {
		t.Errorf("state after Purge: purged before %v, want %v", got, at)
	}

	// A deleted tenant's purge instant stays, for its messages still
	// queued, and is not lost when the tenant is created again.
	now = now.Add(time.Minute)
	deleted, err := r.Delete(ctx, "globex", true)
	if err != nil || !deleted.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("Delete(purge) = %v, %v", deleted, err)
	}
	if s, known := r.StateOf("globex"); known || !s.PurgedBefore.Equal(deleted) {
		t.Errorf("StateOf a deleted tenant: %+v known %v; want its purge instant, unknown", s, known)
	}
	if _, _, err := r.Put(ctx, "globex", tenant.Limits{}); err != nil {
		t.Fatal(err)
	}
	if s, known := r.StateOf("globex"); !known || !s.PurgedBefore.Equal(deleted) {
		t.Errorf("a tenant created again: %+v known %v; want the deletion's purge instant kept", s, known)
	}

	for name, err := range map[string]error{
		"pause unknown":  func() error { _, err := r.Pause(ctx, "nobody", false); return err }(),
		"resume unknown": func() error { _, err := r.Resume(ctx, "nobody"); return err }(),
		"purge unknown":  func() error { _, err := r.Purge(ctx, "nobody"); return err }(),
	} {
		if !errors.Is(err, tenant.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if diff := cmp.Diff(tenant.State{}, st("nobody")); diff != "" {
		t.Errorf("state of a tenant never seen (-want +got):\n%s", diff)
	}
}

// TestPauseReachesOtherProcesses: a pause made through one registry is seen
// by another sharing Redis within a second.
func TestPauseReachesOtherProcesses(t *testing.T) {
	t.Parallel()
	onRedis(t, testPauseReachesOtherProcesses)
}

func testPauseReachesOtherProcesses(t *testing.T, c redis.UniversalClient, prefix string) {
	cfg := tenant.Config{Tenants: fileTenants(), Redis: c, Prefix: prefix}
	a, b := newRegistry(t, cfg), newRegistry(t, cfg)
	changed := b.Changed()
	if _, err := a.Pause(context.Background(), "acme", false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("the other registry did not see the pause within a second")
	}
	if s, _ := b.StateOf("acme"); !s.Paused {
		t.Errorf("other registry: %+v, want paused", s)
	}
}
