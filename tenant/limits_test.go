package tenant_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/tenant"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	defaults := tenant.LimitsDefault.Limits()
	defaults.Concurrency = ptr(7)
	tests := []struct {
		name   string
		limits tenant.Limits
		want   tenant.Resolved
	}{
		{"none set", tenant.Limits{}, tenant.Resolved{100, 200, 100, 100, 7, 1000, 10000, 0}},
		{"zero is a value", tenant.Limits{SoftBacklog: ptr(0)}, tenant.Resolved{100, 200, 100, 100, 7, 0, 10000, 0}},
		{"every field", tenant.Resolved{1, 2, 3, 4, 5, 6, 7, time.Hour}.Limits(), tenant.Resolved{1, 2, 3, 4, 5, 6, 7, time.Hour}},
		{"some fields", tenant.Limits{IngestRate: ptr(0.5), MaxBacklog: ptr(50), DropAge: ptr(tenant.Duration(72 * time.Hour))}, tenant.Resolved{0.5, 200, 100, 100, 7, 1000, 50, 72 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tenant.Resolve(defaults, tt.limits)); diff != "" {
				t.Errorf("Resolve (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("defaults with holes fall back to LimitsDefault", func(t *testing.T) {
		t.Parallel()
		if diff := cmp.Diff(tenant.Resolved{100, 200, 100, 100, 10, 1000, 10000, 0}, tenant.Resolve(tenant.Limits{}, tenant.Limits{})); diff != "" {
			t.Errorf("Resolve (-want +got):\n%s", diff)
		}
	})
}

// TestLimitsJSON: the admin API's form of limits writes and reads durations
// as Go duration strings.
func TestLimitsJSON(t *testing.T) {
	t.Parallel()
	l := tenant.Limits{Concurrency: ptr(3), DropAge: ptr(tenant.Duration(72 * time.Hour))}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"concurrency":3,"drop_age":"72h0m0s"}`; string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var back tenant.Limits
	if err := json.Unmarshal([]byte(`{"drop_age":"90m"}`), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tenant.Limits{DropAge: ptr(tenant.Duration(90 * time.Minute))}, back); diff != "" {
		t.Errorf("Unmarshal (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`{"drop_age":"3 days"}`, `{"drop_age":3600}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s): no error", bad)
		}
	}
}

func TestValidateLimits(t *testing.T) {
	t.Parallel()
	defaults := tenant.LimitsDefault.Limits()
	if err := tenant.ValidateLimits(defaults, tenant.Limits{IngestRate: ptr(3.0), MaxBacklog: ptr(2000)}); err != nil {
		t.Errorf("ValidateLimits(valid) = %v", err)
	}
	err := tenant.ValidateLimits(defaults, tenant.Limits{Concurrency: ptr(0), MaxBacklog: ptr(10), DropAge: ptr(tenant.Duration(-time.Second))})
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *tenant.LimitError
		if !errors.As(e, &le) {
			t.Fatalf("%v is not a *LimitError", e)
		}
		keys = append(keys, le.Key)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"concurrency", "drop_age", "soft_backlog"}, keys); diff != "" {
		t.Errorf("ValidateLimits keys (-want +got):\n%s", diff)
	}
}
