package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fairq/fairq/tenant"
)

func TestRun(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "fairq.yaml")
	if err := os.WriteFile(cfg, []byte("backend: memory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("worker:\n  push_ur: http://x/\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{name: "no command", args: nil, wantCode: 2, wantStderr: "Usage:"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{name: "help", args: []string{"help"}, wantCode: 0, wantStdout: "fairq dev"},
		{name: "version", args: []string{"version"}, wantCode: 0, wantStdout: "fairq "},
		{name: "keys hash", args: []string{"keys", "hash"}, stdin: "secret\n", wantCode: 0, wantStdout: tenant.HashKey("secret")},
		{name: "keys hash empty", args: []string{"keys", "hash"}, stdin: "", wantCode: 2, wantStderr: "no key on stdin"},
		{name: "keys without hash", args: []string{"keys"}, wantCode: 2, wantStderr: "usage"},
		{name: "gateway needs config", args: []string{"gateway"}, wantCode: 2, wantStderr: "--config is required"},
		{name: "worker bad flag", args: []string{"worker", "--nope"}, wantCode: 2, wantStderr: "flag provided but not defined"},
		{name: "unknown config key", args: []string{"gateway", "--config", bad}, wantCode: 1, wantStderr: "worker.push_ur"},
		{name: "queues without sub", args: []string{"queues"}, wantCode: 2, wantStderr: "create"},
		{name: "queues create on memory", args: []string{"queues", "create", "--config", cfg}, wantCode: 2, wantStderr: "sqs backend"},
		{name: "sim moved", args: []string{"sim", "--seed", "7"}, wantCode: 2, wantStderr: "go run ./cmd/fairq-sim"},
		{name: "sim help moved", args: []string{"sim", "-h"}, wantCode: 2, wantStderr: "fairq-sim"},
		{name: "dev stray argument", args: []string{"dev", "extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"fairq"}, tt.args...)
			code := run(t.Context(), args, func(string) string { return "" }, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func TestUnknownEnv(t *testing.T) {
	e := env{environ: func() []string {
		return []string{"FAIRQ_REDIS_ADDR=x:1", "FAIRQ_REDIS_ADR=x:1", "FAIRQ_REQUIRE_SERVICES=1", "HOME=/root", "FAIRQ_WORKER_PUSHURL=http://x/"}
	}}
	got := unknownEnv(e)
	want := []string{"FAIRQ_REDIS_ADR", "FAIRQ_WORKER_PUSHURL"}
	if !slices.Equal(got, want) {
		t.Errorf("unknownEnv = %v, want %v", got, want)
	}
}

// TestRolesRefuseMemory: only dev runs on the memory backend, whose queues
// live inside one process.
func TestRolesRefuseMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fairq.yaml")
	if err := os.WriteFile(path, []byte("backend: memory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"gateway", "worker"} {
		code, _, stderr := cli(t, role, "--config", path)
		if code != 2 || !strings.Contains(stderr, "only fairq dev runs on the memory backend") {
			t.Errorf("fairq %s on memory: exit %d, stderr %q; want 2 and the reason", role, code, stderr)
		}
	}
}
