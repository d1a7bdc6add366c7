package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fairq/fairq/loadtest/harness"
)

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"stray argument", []string{"worker-kill"}, 2, `unexpected argument "worker-kill"`},
		{"unknown fault", []string{"-faults", "flood"}, 1, `unknown fault "flood"`},
		{"fault outlasting its load", []string{"-faults", "worker-kill", "-duration", "1s"}, 1, "must lie within the load"},
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

func TestPick(t *testing.T) {
	o := options{faults: "slow-body, worker-kill", short: true, rate: 7, length: 3 * time.Second, attackers: 10, after: time.Second, repeat: 9}
	fs, err := o.pick()
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 || fs[0].Name != harness.FaultSlowBody || fs[1].Name != harness.FaultWorkerKill {
		t.Fatalf("picked %+v", fs)
	}
	sb, wk := fs[0], fs[1]
	if sb.Rate != 7 || sb.For != 3*time.Second || sb.Attackers != 10 || sb.After != time.Second || sb.Duration != sb.At+sb.For+sb.After+2*time.Second {
		t.Errorf("slow-body %+v: want the flags' rate, length, attackers and watch, and a load covering them", sb)
	}
	if wk.Rate != 7 || wk.For != 3*time.Second || wk.Attackers != 0 || wk.Repeat != 0 {
		t.Errorf("worker-kill %+v: want the flags' rate and length, no attackers, no rounds", wk)
	}
	all, err := options{faults: "all"}.pick()
	if err != nil || len(all) != len(harness.FaultNames) {
		t.Errorf("all: %d faults, %v", len(all), err)
	}
}
