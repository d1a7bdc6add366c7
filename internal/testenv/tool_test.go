package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTool(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "frobnicator"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "not-executable"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		tool        string
		path, gobin string
		require     string
		want        string
		wantSkipped bool
		wantFailed  bool
	}{
		{name: "on PATH", tool: "frobnicator", path: bin, want: filepath.Join(bin, "frobnicator")},
		{name: "in GOBIN", tool: "frobnicator", path: dir, gobin: bin, want: filepath.Join(bin, "frobnicator")},
		{name: "missing skips", tool: "nothing-here", path: dir, gobin: bin, wantSkipped: true},
		{name: "not executable skips", tool: "not-executable", path: dir, gobin: bin, wantSkipped: true},
		{name: "missing fails when required", tool: "nothing-here", path: dir, gobin: bin, require: "1", wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			t.Setenv("GOBIN", tt.gobin)
			t.Setenv(RequireEnv, tt.require)
			r := &recorder{TB: t}
			var got string
			done := make(chan struct{})
			go func() {
				defer close(done)
				got = Tool(r, tt.tool, "install it with care")
			}()
			<-done
			if got != tt.want || r.skipped != tt.wantSkipped || r.failed != tt.wantFailed {
				t.Fatalf("Tool = %q, skipped %v, failed %v; want %q, %v, %v (message %q)",
					got, r.skipped, r.failed, tt.want, tt.wantSkipped, tt.wantFailed, r.msg)
			}
			if (r.skipped || r.failed) && (!strings.Contains(r.msg, tt.tool) || !strings.Contains(r.msg, "install it with care")) {
				t.Errorf("message %q should name %s and how to install it", r.msg, tt.tool)
			}
		})
	}
}
