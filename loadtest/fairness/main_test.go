package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"stray argument", []string{"noisy"}, 2, `unexpected argument "noisy"`},
		{"unknown scenario", []string{"-scenario", "flood"}, 1, `unknown scenario "flood"`},
		{"unknown mode", []string{"-modes", "fair"}, 1, `unknown mode "fair"`},
		{"unknown redis topology", []string{"-modes", "fleet", "-redis", "single,sentinel"}, 1, `unknown Redis topology "sentinel"`},
		{"fleet on memory", []string{"-modes", "fleet", "-backend", "memory"}, 1, "fleet mode runs on the sqs backend"},
		{"short fleet", []string{"-modes", "fleet", "-short"}, 1, "fleet mode runs the full scenarios"},
		{"nothing to render", []string{"-scenario", "noisy", "-render", "-out", "/nonexistent/fairness"}, 1, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(t.Context(), tt.args, &out, &errOut)
			if code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("run(%q) = %d, stderr %q; want %d and %q", tt.args, code, errOut.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
}
