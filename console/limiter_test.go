package console

import (
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestLoginLimiter(t *testing.T) {
	t.Parallel()
	c := newClock()
	l := newLoginLimiter(rate.Every(6*time.Second), 3, 2, c.Now)
	for i := range 3 {
		if ok, _ := l.allow("a"); !ok {
			t.Fatalf("attempt %d of a refused within the burst", i+1)
		}
	}
	ok, wait := l.allow("a")
	if ok || wait != 6*time.Second {
		t.Errorf("4th attempt of a: %v, wait %v; want refused for 6s", ok, wait)
	}
	// A refused attempt takes nothing: after the wait, one more.
	c.Advance(wait)
	if ok, _ := l.allow("a"); !ok {
		t.Error("after the wait: refused")
	}
	if ok, _ := l.allow("b"); !ok {
		t.Error("another client: refused")
	}
	// The map is full (a, b): c shares the overflow bucket...
	for i := range 3 {
		if ok, _ := l.allow("c"); !ok {
			t.Fatalf("attempt %d of c (overflow) refused within the burst", i+1)
		}
	}
	if ok, _ := l.allow("d"); ok {
		t.Error("d, in the overflow bucket c emptied: allowed")
	}
	// ...until the idle are forgotten: after 18s every bucket is full.
	c.Advance(18 * time.Second)
	if ok, _ := l.allow("d"); !ok {
		t.Error("d after the others went idle: refused")
	}
	if _, seen := l.clients["d"]; !seen {
		t.Errorf("d not counted apart once there was room: %v", l.clients)
	}
}

func TestClientOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.7:5555", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"pipe", "pipe"},
	} {
		r := httptest.NewRequest("POST", "/console/login", nil)
		r.RemoteAddr = tc.remote
		if got := clientOf(r); got != tc.want {
			t.Errorf("clientOf(%s) = %s, want %s", tc.remote, got, tc.want)
		}
	}
}
