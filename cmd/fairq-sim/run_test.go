package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // substring
		wantStderr string // substring
	}{
		{name: "help", args: []string{"-h"}, wantCode: 0, wantStderr: "Usage: fairq-sim [flags]"},
		{name: "bad flag", args: []string{"--nope"}, wantCode: 2, wantStderr: "flag provided but not defined"},
		{name: "stray argument", args: []string{"extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
		{name: "unknown strategy", args: []string{"--strategies", "fastest"}, wantCode: 2, wantStderr: `unknown strategy "fastest"`},
		{name: "shard larger than pool", args: []string{"--queues", "4", "--shard", "5"}, wantCode: 2, wantStderr: "invalid simulation config"},
		{name: "one experiment", args: []string{"--seed", "7", "--duration", "5s", "--strategies", "shared,shard-shallowest"}, wantCode: 0,
			wantStdout: "fairq-sim: seed 7, N=8 queues, shards of k=2", wantStderr: "fairq-sim: simulated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"fairq-sim"}, tt.args...), &stdout, &stderr)
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

// TestRunOut: --out writes the three CSV files and the chart, and says so.
func TestRunOut(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "made-here")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"fairq-sim", "--seed", "7", "--duration", "5s", "--out", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	for _, name := range []string{"summary.csv", "tenants.csv", "windows.csv", "latency.png"} {
		path := filepath.Join(dir, name)
		if !strings.Contains(stderr.String(), path) {
			t.Errorf("stderr does not name %s:\n%s", path, stderr.String())
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".png") {
			_, err = png.Decode(f)
		} else {
			_, err = csv.NewReader(f).ReadAll()
		}
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
