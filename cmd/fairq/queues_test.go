package main

import (
	"strings"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// TestQueuesCreate creates the queues on the emulator twice: the first run
// creates all eleven with their redrive policy, the second changes nothing
// and says so.
func TestQueuesCreate(t *testing.T) {
	path, prefix := sqsConfig(t, "")
	create := func() string {
		t.Helper()
		code, stdout, stderr := cli(t, "queues", "create", "--config", path)
		if code != 0 {
			t.Fatalf("queues create: exit %d; stderr:\n%s", code, stderr)
		}
		return stdout
	}
	if got, want := create(), "11 queues: 11 created, 0 updated, 0 unchanged"; !strings.Contains(got, want) {
		t.Errorf("first run printed %q, want %q", got, want)
	}
	if got, want := create(), "nothing changed"; !strings.Contains(got, want) {
		t.Errorf("second run printed %q, want %q", got, want)
	}

	// The work queues dead-letter to the DLQ.
	b := testenv.SQSBackend(t)
	for _, name := range []string{prefix + "-live-00", prefix + "-live-07", prefix + "-overflow", prefix + "-backlog", prefix + "-dlq"} {
		if _, err := b.Depth(t.Context(), name); err != nil {
			t.Errorf("queue %s: %v", name, err)
		}
	}
}
