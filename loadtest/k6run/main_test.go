package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/tenant"
)

func TestRunRefuses(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"stray argument", []string{"steady"}, 2, `unexpected argument "steady"`},
		{"unknown script", []string{"-script", "steady,flood"}, 1, `unknown script "flood"`},
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

// The generated configuration is one fairq accepts, and knows every key
// of the keys file by its hash.
func TestGenerate(t *testing.T) {
	keys, data := generate()
	cfg, err := config.Parse(data, func(string) string { return "" })
	if err != nil {
		t.Fatalf("fairq rejects the configuration: %v\n%s", err, data)
	}
	if len(keys.Tenants) != quietTenants+1 || len(cfg.Tenants) != len(keys.Tenants) {
		t.Fatalf("%d keys, %d tenants in the configuration; want %d each", len(keys.Tenants), len(cfg.Tenants), quietTenants+1)
	}
	roles := map[string]int{}
	for i, k := range keys.Tenants {
		roles[k.Role]++
		ct := cfg.Tenants[i]
		if ct.ID != k.ID || len(ct.APIKeys) != 1 || ct.APIKeys[0] != tenant.HashKey(k.Key) {
			t.Errorf("tenant %s: configuration %+v does not hold the hash of its key", k.ID, ct)
		}
	}
	if roles["quiet"] != quietTenants || roles["noisy"] != 1 {
		t.Errorf("roles %v, want %d quiet and 1 noisy", roles, quietTenants)
	}
	if l := tenant.Resolve(cfg.Defaults, tenant.Limits{}); l.IngestRate != ingestRate || l.IngestBurst != ingestBurst {
		t.Errorf("ingest %v/%d, want %d/%d", l.IngestRate, l.IngestBurst, ingestRate, ingestBurst)
	}
}
