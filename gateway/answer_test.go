package gateway

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fairq/fairq/throttle"
)

// TestWriteAccepted: the hand-written answer is what writeJSON writes.
func TestWriteAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a    accepted
	}{
		{"plain", accepted{ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Tenant: "acme", Queue: "fairq-live-03", EnqueuedAt: "2030-05-06T07:08:09.123Z"}},
		{"empty", accepted{}},
		{"escaped", accepted{ID: `q"uo\te`, Tenant: "<a&b>", Queue: "tab\tnl\nnul\x00", EnqueuedAt: "é \u2028\u2029 😀 \x7f"}},
		{"invalid UTF-8", accepted{ID: "\xff\xfe", Tenant: "a\xc3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want, got := httptest.NewRecorder(), httptest.NewRecorder()
			writeJSON(want, http.StatusAccepted, tc.a)
			writeAccepted(got, http.StatusAccepted, tc.a)
			if diff := cmp.Diff(want.Body.String(), got.Body.String()); diff != "" {
				t.Errorf("body (-writeJSON +writeAccepted):\n%s", diff)
			}
			if diff := cmp.Diff(want.Header(), got.Header()); diff != "" {
				t.Errorf("header (-writeJSON +writeAccepted):\n%s", diff)
			}
			if got.Code != http.StatusAccepted {
				t.Errorf("status %d, want 202", got.Code)
			}
		})
	}
}

// TestHeaderNamesCanonical: the header names set without Header.Set are
// in the form Header.Set would store them in.
func TestHeaderNamesCanonical(t *testing.T) {
	t.Parallel()
	for _, name := range []string{headerContentType, headerCacheControl, headerRateLimitLimit,
		headerRateLimitRemaining, headerRateLimitReset, HeaderRequestID, headerTraceparent, HeaderIdempotencyKey} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("header %q is %q in canonical form", name, c)
		}
	}
	if c := http.CanonicalHeaderKey(HeaderTraceparent); c != headerTraceparent {
		t.Errorf("traceparent is %q in canonical form, not %q", c, headerTraceparent)
	}
}

// TestSetRateLimitHeaders: the values, and each its own slice.
func TestSetRateLimitHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    throttle.Decision
		want http.Header
	}{
		{"none", throttle.Decision{}, http.Header{}},
		{"full", throttle.Decision{Limit: throttle.Limit{Rate: 10, Burst: 1_000_000}, Remaining: 999_999, ResetAfter: 100 * time.Millisecond},
			http.Header{"Ratelimit-Limit": {"1000000"}, "Ratelimit-Remaining": {"999999"}, "Ratelimit-Reset": {"1"}}},
		{"empty", throttle.Decision{Limit: throttle.Limit{Rate: 0.5}, Remaining: -1, ResetAfter: 2500 * time.Millisecond},
			http.Header{"Ratelimit-Limit": {"1"}, "Ratelimit-Remaining": {"0"}, "Ratelimit-Reset": {"3"}}},
		{"no wait", throttle.Decision{Limit: throttle.Limit{Rate: 1, Burst: 5}, Remaining: 5},
			http.Header{"Ratelimit-Limit": {"5"}, "Ratelimit-Remaining": {"5"}, "Ratelimit-Reset": {"0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			setRateLimitHeaders(h, tc.d)
			if diff := cmp.Diff(tc.want, h); diff != "" {
				t.Fatalf("headers (-want +got):\n%s", diff)
			}
			if len(h) > 0 {
				h.Add("RateLimit-Limit", "x")
				if got := h.Values("RateLimit-Remaining"); len(got) != 1 {
					t.Errorf("adding to one value changed another: %q", got)
				}
			}
		})
	}
}

// BenchmarkWriteAccepted writes the answer to a message.
func BenchmarkWriteAccepted(b *testing.B) {
	a := accepted{ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Tenant: "acme", Queue: "fairq-live-03", EnqueuedAt: "2030-05-06T07:08:09.123Z"}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		w.Body.Reset()
		writeAccepted(w, http.StatusAccepted, a)
	}
}

// TestFormatTime: the hand-written form is what time.Format writes.
func TestFormatTime(t *testing.T) {
	t.Parallel()
	times := []time.Time{
		{},
		time.Date(2030, 5, 6, 7, 8, 9, 123_456_789, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.FixedZone("x", -7*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.UnixMilli(0),
		time.Now(),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		times = append(times, time.UnixMilli(r.Int64N(400*365*24*3600*1000)-100*365*24*3600*1000))
	}
	for _, tm := range times {
		if got, want := formatTime(tm), tm.UTC().Format(timeLayout); got != want {
			t.Errorf("formatTime(%v) = %q, want %q", tm, got, want)
		}
	}
}
