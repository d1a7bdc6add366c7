package tenant

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors callers match on.
var (
	// ErrUnauthorized: no tenant has the key presented.
	ErrUnauthorized = errors.New("unknown API key")
	// ErrNotFound: no tenant has the id.
	ErrNotFound = errors.New("tenant not found")
	// ErrKeyNotFound: the tenant has no key with the id.
	ErrKeyNotFound = errors.New("API key not found")
	// ErrInvalid: an id, a key hash or limits are not acceptable.
	ErrInvalid = errors.New("invalid tenant")
	// ErrTooManyKeys: the tenant already has MaxKeys keys.
	ErrTooManyKeys = errors.New("too many API keys")
	// ErrUnavailable: the shared store (Redis) cannot be reached.
	ErrUnavailable = errors.New("tenant store unavailable")
)

// Limits of the registry.
const (
	MaxIDLength  = 64
	MaxKeys      = 100  // API keys per tenant
	MaxKeyLength = 1024 // longer presented keys are refused unhashed
	hashPrefix   = "sha256:"
)

// Tenant is one tenant as the registry holds it. A Tenant returned by the
// registry shares its Keys with the registry: do not modify them.
type Tenant struct {
	ID string
	// Limits are the tenant's limits resolved over the defaults.
	Limits Resolved
	// Overrides are the limits the tenant sets itself; nil fields follow
	// the defaults.
	Overrides Limits
	Keys      []Key
	// FromConfig is true while the tenant is as the configuration file
	// defines it, false once the admin API created or changed it.
	FromConfig bool
	// State is what an operator set: paused, and the purge instant.
	State
}

// State is the part of a tenant an operator acts on.
type State struct {
	// Paused: the tenant's messages are accepted but not started; they
	// wait until Resume.
	Paused bool
	// PauseIngest: with Paused, the front door refuses the tenant's new
	// messages too (tenant_paused).
	PauseIngest bool
	// PurgedBefore: the tenant's messages enqueued before it are deleted
	// unseen by the worker that next receives them. Zero: none.
	PurgedBefore time.Time
}

// Key is one API key of a tenant, as stored: never the key itself.
type Key struct {
	ID        string    // the first 16 hex digits of the hash
	Hash      string    // "sha256:<64 hex>"
	CreatedAt time.Time // zero for keys from the configuration file
}

// HashKey returns the stored form of an API key, "sha256:<64 lowercase
// hex>".
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// parseHash decodes "sha256:<64 lowercase hex>".
func parseHash(s string) ([32]byte, error) {
	var h [32]byte
	hexPart, ok := strings.CutPrefix(s, hashPrefix)
	if !ok || len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return h, fmt.Errorf("%w: key hash must be %s<64 lowercase hex digits>", ErrInvalid, hashPrefix)
	}
	if _, err := hex.Decode(h[:], []byte(hexPart)); err != nil {
		return h, fmt.Errorf("%w: key hash must be %s<64 lowercase hex digits>", ErrInvalid, hashPrefix)
	}
	return h, nil
}

// idOf returns the id of a key from its hash.
func idOf(h [32]byte) string { return hex.EncodeToString(h[:8]) }

// newKey returns a fresh API key: "fq_" and 32 random bytes in unpadded
// base64url.
func newKey() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return "fq_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidID reports whether id can name a tenant: 1–64 letters, digits, '-',
// '_' or '.'.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func checkID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: id %q: want 1–%d letters, digits, '-', '_' or '.'", ErrInvalid, id, MaxIDLength)
	}
	return nil
}
