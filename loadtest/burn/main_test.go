package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no cores", nil, "-cores must be more than 0"},
		{"zero", []string{"-cores", "0"}, "-cores must be more than 0"},
		{"negative", []string{"-cores", "-1"}, "-cores must be more than 0"},
		{"more than the machine has", []string{"-cores", "4096"}, "at most the machine's"},
		{"not a number", []string{"-cores", "half"}, "invalid value"},
		{"stray argument", []string{"-cores", "0.1", "now"}, `unexpected argument "now"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(t.Context(), tt.args, &out, &errOut)
			if code != 2 || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tt.args, code, errOut.String(), tt.wantErr)
			}
		})
	}
}

// TestRunBurnsUntilStopped runs the command until its context ends, as a
// signal ends it, and checks that it says what it burnt.
func TestRunBurnsUntilStopped(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"-cores", "0.2"}, &out, &errOut); code != 0 {
		t.Fatalf("run = %d, stderr %q", code, errOut.String())
	}
	if !regexp.MustCompile(`^burnt \d+\.\d{3} cores \(\d+\.\d s of CPU\) over 0\.\d s\n$`).MatchString(out.String()) {
		t.Errorf("stdout %q: want what it burnt", out.String())
	}
}
