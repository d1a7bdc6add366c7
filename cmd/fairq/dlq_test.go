package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fairq/fairq/envelope"
	"github.com/fairq/fairq/internal/testenv"
	"github.com/fairq/fairq/queue"
)

// TestDLQRedrive dead-letters messages of two tenants on the emulator and
// moves one tenant's back with `fairq dlq redrive --tenant`.
func TestDLQRedrive(t *testing.T) {
	path, prefix := sqsConfig(t, "pool: {queues: 4, shard_size: 2}\n")
	fairq := func(args ...string) (string, int) {
		t.Helper()
		code, stdout, stderr := cli(t, args...)
		return stdout + stderr, code
	}
	if out, code := fairq("queues", "create", "--config", path); code != 0 {
		t.Fatalf("queues create: %d %s", code, out)
	}
	b := testenv.SQSBackend(t)
	names := queue.PoolNames(prefix, 4)
	var entries []queue.Entry
	for i, tenant := range []string{"acme", "acme", "globex"} {
		meta := envelope.Meta{EnqueuedAt: 1, Attempts: 10, LastError: "status 500"}
		entries = append(entries, queue.Entry{
			ID:         fmt.Sprint(i),
			Body:       "job " + tenant,
			Attributes: map[string]string{envelope.AttrTenant: tenant, envelope.AttrMeta: meta.Encode()},
		})
	}
	if res, err := b.Send(t.Context(), names.DLQ, entries); err != nil || res[0].Err != nil {
		t.Fatalf("seed DLQ: %v %v", res, err)
	}

	out, code := fairq("dlq", "redrive", "--config", path, "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "moved 2, skipped 1, failed 0") || !strings.Contains(out, `tenant "acme": 2`) {
		t.Fatalf("dlq redrive: exit %d, output:\n%s", code, out)
	}
	var live int
	for _, q := range names.Live {
		d, err := b.Depth(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		live += d.Visible
	}
	if live != 2 {
		t.Errorf("live queues hold %d messages after the redrive, want 2", live)
	}
	// The moved messages start their attempts again.
	for _, q := range names.Live {
		msgs, err := b.Receive(t.Context(), q, queue.ReceiveOptions{Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			meta, err := envelope.Decode(m.Attributes[envelope.AttrMeta])
			if err != nil || meta.Attempts != 0 || m.Attributes[envelope.AttrTenant] != "acme" {
				t.Errorf("moved message: tenant %q, meta %+v (%v); want acme with attempts reset",
					m.Attributes[envelope.AttrTenant], meta, err)
			}
		}
	}
	if out, code := fairq("dlq", "redrive", "--config", path, "--max", "-1"); code != 2 {
		t.Errorf("--max -1: exit %d, want 2; %s", code, out)
	}
}
