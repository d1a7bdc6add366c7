package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// ErrNoSession means that a request carries no session cookie, or one
// that is malformed, forged, signed under another admin token, or expired.
var ErrNoSession = errors.New("console: no valid session")

// Why a session cookie was refused; each is an ErrNoSession.
var (
	errMalformed = fmt.Errorf("%w: malformed", ErrNoSession)
	errForged    = fmt.Errorf("%w: bad signature", ErrNoSession)
	errExpired   = fmt.Errorf("%w: expired", ErrNoSession)
)

// The layout of a session value before its base64url encoding: a version
// byte, the expiry in Unix seconds, a random nonce, then the HMAC-SHA256
// of all that.
const (
	sessionVersion = 1
	expiryLen      = 8
	nonceLen       = 16
	signedLen      = 1 + expiryLen + nonceLen
	sessionLen     = signedLen + sha256.Size
)

// sessionKeyLabel derives the signing key from the admin token's sha256,
// so that the key is not the stored hash itself and a new token is a new
// key.
const sessionKeyLabel = "fairq console session v1"

// sessions issues and verifies session values. They hold no state: any
// process that knows the admin token's sha256 verifies a value any other
// issued, which is what a fleet of gateways behind a load balancer needs,
// and a value cannot be revoked except by changing the token.
type sessions struct {
	key      [sha256.Size]byte
	lifetime time.Duration
	now      func() time.Time
}

func newSessions(tokenSHA256 [32]byte, lifetime time.Duration, now func() time.Time) *sessions {
	s := &sessions{lifetime: lifetime, now: now}
	m := hmac.New(sha256.New, tokenSHA256[:])
	m.Write([]byte(sessionKeyLabel))
	copy(s.key[:], m.Sum(nil))
	return s
}

// issue returns a new session value and its expiry, whole seconds from now.
func (s *sessions) issue() (string, time.Time) {
	expires := s.now().Add(s.lifetime).Truncate(time.Second)
	b := make([]byte, 0, sessionLen)
	b = append(b, sessionVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(expires.Unix()))
	var nonce [nonceLen]byte
	rand.Read(nonce[:]) // never fails (crypto/rand)
	b = append(b, nonce[:]...)
	b = s.sign(b)
	return base64.RawURLEncoding.EncodeToString(b), expires
}

// sign appends the MAC of b to b.
func (s *sessions) sign(b []byte) []byte {
	m := hmac.New(sha256.New, s.key[:])
	m.Write(b)
	return m.Sum(b)
}

// verify returns nil for a value issue made under the same key that has
// not expired, else an ErrNoSession saying why.
func (s *sessions) verify(value string) error {
	if base64.RawURLEncoding.DecodedLen(len(value)) != sessionLen {
		return errMalformed
	}
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) != sessionLen || b[0] != sessionVersion {
		return errMalformed
	}
	want := s.sign(append(make([]byte, 0, sessionLen), b[:signedLen]...))
	if !hmac.Equal(b, want) {
		return errForged
	}
	expires := time.Unix(int64(binary.BigEndian.Uint64(b[1:1+expiryLen])), 0)
	if !s.now().Before(expires) {
		return errExpired
	}
	return nil
}
