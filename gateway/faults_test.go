package gateway_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSendFaults(t *testing.T) {
	t.Parallel()
	fault := errors.New("api error InternalError: We encountered an internal error")
	tests := []struct {
		name        string
		fails       int
		wantStatus  int
		wantDepth   int
		wantCalls   int
		wantCorrect map[int]int
	}{
		{"one fault is retried", 1, http.StatusAccepted, 1, 2, map[int]int{}},
		{"two faults are retried", 2, http.StatusAccepted, 1, 3, map[int]int{}},
		{"three faults are a 503", 3, http.StatusServiceUnavailable, 0, 3, map[int]int{0: -1}},
		{"an outage is a 503", -1, http.StatusServiceUnavailable, 0, 3, map[int]int{0: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.flaky.FailSends(tt.fails, fault)
			w := f.do(t, request{key: acmeKey, body: `{"body":"x"}`})
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if tt.wantStatus == http.StatusServiceUnavailable {
				if p := decode[problem](t, w); p.Code != "unavailable" || w.Header().Get("Retry-After") == "" {
					t.Errorf("problem %+v, Retry-After %q", p, w.Header().Get("Retry-After"))
				}
			}
			if n := f.depth(t); n != tt.wantDepth {
				t.Errorf("%d messages on the queues, want %d", n, tt.wantDepth)
			}
			if calls, _ := f.flaky.Sends(); calls != tt.wantCalls {
				t.Errorf("%d send calls, want %d", calls, tt.wantCalls)
			}
			if diff := cmp.Diff(tt.wantCorrect, f.picker.Corrections()); diff != "" {
				t.Errorf("picker corrections (-want +got):\n%s", diff)
			}
		})
	}
}
