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
		notStdout  string // substring that must not appear, if any
	}{
		{name: "help", args: []string{"-h"}, wantCode: 0, wantStderr: "Usage: fairq-sim [flags]"},
		{name: "bad flag", args: []string{"--nope"}, wantCode: 2, wantStderr: "flag provided but not defined"},
		{name: "stray argument", args: []string{"extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
		{name: "unknown strategy", args: []string{"--strategies", "fastest"}, wantCode: 2, wantStderr: `unknown strategy "fastest"`},
		{name: "shard larger than pool", args: []string{"--queues", "4", "--shard", "5"}, wantCode: 2, wantStderr: "invalid simulation config"},
		{name: "one experiment", args: []string{"--seed", "7", "--duration", "5s", "--strategies", "shared,shard-shallowest"}, wantCode: 0,
			wantStdout: "fairq-sim: seed 7, N=8 queues, shards of k=2", wantStderr: "fairq-sim: simulated"},
		{name: "several noisy tenants", args: []string{"--noisy-tenants", "3", "--duration", "5s", "--strategies", "shard-shallowest"}, wantCode: 0,
			wantStdout: "20 quiet tenants at 10 msg/s, 3 noisy at 1000 msg/s each"},
		{name: "sweep help", args: []string{"sweep", "-h"}, wantCode: 0, wantStderr: "Usage: fairq-sim sweep [flags]"},
		{name: "sweep stray argument", args: []string{"sweep", "extra"}, wantCode: 2, wantStderr: `unexpected argument "extra"`},
		{name: "sweep bad list", args: []string{"sweep", "--queues", "8,many"}, wantCode: 2, wantStderr: `"many" is not a whole number`},
		{name: "sweep bad share", args: []string{"sweep", "--noisy-share", "lots"}, wantCode: 2, wantStderr: `"lots" is not a share`},
		{name: "sweep two tolerances", args: []string{"sweep", "--tolerance", "1%,2%"}, wantCode: 2, wantStderr: "one tolerance"},
		{name: "sweep invalid", args: []string{"sweep", "--tenants", "1", "--no-sim"}, wantCode: 2, wantStderr: "1 tenants, want at least 2"},
		{name: "sweep combinatorics", args: []string{"sweep", "--no-sim"}, wantCode: 0,
			wantStdout: "  100   2   4,950           0.0202% (0.02 of 99)", wantStderr: "fairq-sim sweep: simulated 0 messages"},
		{name: "sweep percent or fraction", args: []string{"sweep", "--no-sim", "--tenants", "1000", "--noisy-share", "0.005", "--tolerance", "0.5%"}, wantCode: 0,
			wantStdout: "1000 tenants, 5 noisy (0.5%):"},
		{name: "sweep long grid", args: []string{"sweep", "--no-sim", "--long"}, wantCode: 0,
			wantStdout: "10000 tenants, 100 noisy (1%):"},
		{name: "sweep long, grid given", args: []string{"sweep", "--no-sim", "--long", "--tenants", "300"}, wantCode: 0,
			wantStdout: "  256   4   174,792,640", notStdout: "10000 tenants"},
		{name: "sweep simulated", args: []string{"sweep", "--queues", "32", "--shards", "2", "--tenants", "200", "--duration", "3s"}, wantCode: 0,
			wantStdout: "200 tenants, 2 noisy (1%):", wantStderr: "fairq-sim sweep: simulated"},
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
			if tt.notStdout != "" && strings.Contains(stdout.String(), tt.notStdout) {
				t.Errorf("stdout = %q, want it without %q", stdout.String(), tt.notStdout)
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
