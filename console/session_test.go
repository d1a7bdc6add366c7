package console

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func testSessions(token string, c *clock) *sessions {
	return newSessions(sha256.Sum256([]byte(token)), 12*time.Hour, c.Now)
}

func TestSessionIssueVerify(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := testSessions("token", c)
	v, expires := s.issue()
	if want := c.Now().Add(12 * time.Hour); !expires.Equal(want) {
		t.Errorf("expires %v, want %v", expires, want)
	}
	if err := s.verify(v); err != nil {
		t.Fatalf("verify a fresh session: %v", err)
	}
	if strings.ContainsAny(v, "=+/;, ") {
		t.Errorf("value %q is not cookie-safe base64url", v)
	}
	if w, _ := s.issue(); w == v {
		t.Error("two sessions issued at one instant are equal: no nonce")
	}
	// Another process with the same token: a fleet of gateways.
	if err := testSessions("token", c).verify(v); err != nil {
		t.Errorf("verify on another process with the same token: %v", err)
	}
}

func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := testSessions("token", c)
	v, _ := s.issue()
	c.Advance(12*time.Hour - time.Second)
	if err := s.verify(v); err != nil {
		t.Fatalf("a second before expiry: %v", err)
	}
	c.Advance(time.Second)
	if err := s.verify(v); !errors.Is(err, errExpired) || !errors.Is(err, ErrNoSession) {
		t.Errorf("at expiry: %v, want expired", err)
	}
}

// TestSessionRefused: every value that issue did not make under this key,
// or altered in any byte, is refused.
func TestSessionRefused(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := testSessions("token", c)
	v, _ := s.issue()
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	// A value of the right shape, signed under this key, with a version
	// this code does not know.
	v2 := append([]byte{2}, raw[1:signedLen]...)
	v2 = s.sign(v2)
	cases := []struct {
		name, value string
		want        error
	}{
		{"empty", "", errMalformed},
		{"not base64", strings.Repeat("*", len(v)), errMalformed},
		{"short", v[:len(v)-4], errMalformed},
		{"long", v + "AAAA", errMalformed},
		{"padded", v + "=", errMalformed},
		{"another version", enc(v2), errMalformed},
		{"rotated token", func() string { w, _ := testSessions("new token", c).issue(); return w }(), errForged},
		{"zero MAC", enc(append(append([]byte{}, raw[:signedLen]...), make([]byte, sha256.Size)...)), errForged},
	}
	// Each byte altered: the version byte is malformed, any other forged.
	for i := range raw {
		b := append([]byte{}, raw...)
		b[i] ^= 0x01
		want := errForged
		if i == 0 {
			want = errMalformed
		}
		cases = append(cases, struct {
			name, value string
			want        error
		}{fmt.Sprintf("byte %d altered", i), enc(b), want})
	}
	// A later expiry with the old MAC: the expiry is signed.
	later := append([]byte{}, raw...)
	later[1+expiryLen-1]++
	cases = append(cases, struct {
		name, value string
		want        error
	}{"expiry moved", enc(later), errForged})
	for _, tc := range cases {
		if err := s.verify(tc.value); !errors.Is(err, tc.want) || !errors.Is(err, ErrNoSession) {
			t.Errorf("%s: verify = %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestSessionKeyIsNotTheHash: the signing key is derived, so a value
// signed with the stored hash itself as key is refused.
func TestSessionKeyIsNotTheHash(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := testSessions("token", c)
	naive := &sessions{key: sha256.Sum256([]byte("token")), lifetime: time.Hour, now: c.Now}
	v, _ := naive.issue()
	if err := s.verify(v); !errors.Is(err, errForged) {
		t.Errorf("a value signed with the token's hash as key: %v, want forged", err)
	}
}
