package tenant_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/keyslot"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/tenant"
)

func TestRedisKeysShareASlot(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"fairq:", "acme-prod:", ""} {
		if err := keyslot.Check(tenant.RedisKeyGroups(prefix)); err != nil {
			t.Errorf("prefix %q: %v", prefix, err)
		}
	}
}

// TestRecordsOfTheFirstRelease: the records that release 0.1.0 stored, in
// its layout (records, revisions and version in three slots), are read by
// this one as they are: a tenant created through the admin API is there
// with its limits and keys, takes concurrent changes, and the changes
// reach another registry. 0.1.0 ran on one Redis node only, so that is
// where its layout can be found.
func TestRecordsOfTheFirstRelease(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	prefix := testenv.Prefix(t) + ":"
	ctx := context.Background()
	const issued = "fq_issued-by-0.1.0-0123456789abcdefghijklmnop"
	acmeKeyID := strings.TrimPrefix(tenant.HashKey("acme-key"), "sha256:")[:16]
	// What 0.1.0's putScript left after two changes to initech, created
	// through the admin API, and one to acme, a tenant of the file.
	if err := c.HSet(ctx, prefix+"tenants",
		"initech", `{"limits":{"ingest_rate":7,"ingest_burst":3},"keys":[{"id":"00112233aabbccdd","hash":"`+tenant.HashKey(issued)+`","created":1764000000000}],"updated":1764000000000}`,
		"acme", `{"limits":{"max_backlog":2000},"keys":[{"id":"`+acmeKeyID+`","hash":"`+tenant.HashKey("acme-key")+`"}],"updated":1764000000000}`,
	).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, prefix+"tenants:rev", "initech", 2, "acme", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, prefix+"tenants:version", 3, 0).Err(); err != nil {
		t.Fatal(err)
	}

	cfg := tenant.Config{Tenants: fileTenants(), Redis: c, Prefix: prefix}
	a, b := newRegistry(t, cfg), newRegistry(t, cfg)
	got, ok := a.Get("initech")
	if !ok || got.Limits.IngestRate != 7 || got.Limits.IngestBurst != 3 || len(got.Keys) != 1 || got.Keys[0].ID != "00112233aabbccdd" {
		t.Fatalf("initech after the upgrade: %+v, %v", got, ok)
	}
	if who, err := a.Authenticate(issued); err != nil || who.ID != "initech" {
		t.Fatalf("the key 0.1.0 issued: %+v, %v", who, err)
	}
	if acme, _ := a.Get("acme"); acme.FromConfig || acme.Limits.MaxBacklog != 2000 {
		t.Errorf("acme after the upgrade: %+v; want the stored limits over the file's", acme)
	}

	// The first changes of a record without a revision in this layout
	// compare and swap as any: made at once through two registries, all
	// land.
	changed := b.Changed()
	if _, created, err := a.Put(ctx, "initech", tenant.Limits{IngestRate: ptr(9.0)}); err != nil || created {
		t.Fatalf("Put initech: created %v, %v", created, err)
	}
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("the other registry did not see the change within a second")
	}
	if got, _ := b.Get("initech"); got.Limits.IngestRate != 9 || len(got.Keys) != 1 {
		t.Errorf("the other registry: %+v; want the new rate and the key of 0.1.0", got)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		keys = []string{"acme-key"}
	)
	for i := range 6 {
		wg.Go(func() {
			_, key, err := []*tenant.Registry{a, b}[i%2].IssueKey(ctx, "acme")
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
	if err := a.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if who, err := a.Authenticate(k); err != nil || who.ID != "acme" {
			t.Errorf("a key of acme is lost: %+v, %v", who, err)
		}
	}
	var ids []string
	for _, tn := range a.List() {
		ids = append(ids, tn.ID)
	}
	if diff := cmp.Diff([]string{"acme", "globex", "initech"}, ids); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}
