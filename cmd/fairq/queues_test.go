package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fairq/fairq/internal/testenv"
)

// TestQueuesCreate creates the queues on the emulator twice: the first run
// creates all eleven with their redrive policy, the second changes nothing
// and says so.
func TestQueuesCreate(t *testing.T) {
	endpoint := testenv.SQSEndpoint(t)
	prefix := testenv.Prefix(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	path := filepath.Join(t.TempDir(), "fairq.yaml")
	yaml := fmt.Sprintf("backend: sqs\nsqs: {endpoint: %q, queue_prefix: %s}\n", endpoint, prefix)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	create := func() string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"fairq", "queues", "create", "--config", path},
			func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		if code != 0 {
			t.Fatalf("queues create: exit %d; stderr:\n%s", code, stderr.String())
		}
		return stdout.String()
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
