package config

import (
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

// FuzzParse feeds Parse arbitrary bytes: it must not panic, every error must
// match ErrInvalid, and a Config it accepts must survive a round trip
// through yaml.Marshal unchanged.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../fairq.example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		"",
		"listen: :1\nworker: {connect_timeout: 1s, drop_age: 0}\n",
		"tenants:\n  - &a {id: a, concurrency: 1}\n  - {<<: *a, id: b}\n",
		"tenants:\n  - &a {id: x, <<: *a}\n",
		"pool: {queues: 1.5}\nlisten: [\n",
		"a: &a [*a]\n",
		"---\n---\n",
		"? [a]\n: b\n",
		"defaults: {ingest_rate: .inf, ingest_burst: !!int 1}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %q does not match ErrInvalid", err)
			}
			return
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("Marshal(accepted config): %v", err)
		}
		again, err := Parse(out, nil)
		if err != nil {
			t.Fatalf("Parse(Marshal(cfg)) = %v\n%s", err, out)
		}
		if diff := cmp.Diff(cfg, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
