package idempotency

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"time"
)

// Outcome is what a Claim found.
type Outcome int

// The outcomes of a Claim.
const (
	// Owned: the caller owns the key; it sends with Claim.ID, then calls
	// Complete, Release or Abandon with Claim.Token.
	Owned Outcome = iota + 1
	// Done: an earlier request completed; Claim.Answer is its answer.
	Done
	// InProgress: another request owns the key and may still be sending;
	// Claim.RetryAfter is when its lease ends.
	InProgress
	// Reused: the key was used by a request with another fingerprint.
	Reused
)

func (o Outcome) String() string {
	switch o {
	case Owned:
		return "owned"
	case Done:
		return "done"
	case InProgress:
		return "in progress"
	case Reused:
		return "reused"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Claim is the answer of a store to a claim.
type Claim struct {
	Outcome Outcome
	// Token proves ownership to Complete, Release and Abandon (Owned).
	Token string
	// ID is the id to send the message with (Owned): the claim's own, or
	// that of an abandoned earlier attempt.
	ID string
	// Answer is the first request's answer (Done).
	Answer []byte
	// RetryAfter is how long the owner's lease has left (InProgress).
	RetryAfter time.Duration
}

// Request is what a claim records of a request.
type Request struct {
	// Key is the full key: the tenant's and the caller's Idempotency-Key
	// (see Key).
	Key string
	// Fingerprint identifies the request's content (see Fingerprint).
	Fingerprint string
	// ID is the id the message gets if the key is new.
	ID string
}

// Defaults of the stores.
const (
	WindowDefault   = 24 * time.Hour
	LeaseDefault    = 10 * time.Second
	MaxLocalDefault = 100_000
)

// ErrUnavailable wraps the errors of a store that could not be reached.
var ErrUnavailable = errors.New("idempotency store unavailable")

// Key is the stored key of a tenant's Idempotency-Key.
func Key(tenant, key string) string { return tenant + ":" + key }

// Fingerprint returns a fingerprint of a message's content: its body, its
// attributes and its delay. Two requests with the same Idempotency-Key
// and different fingerprints are a misuse of the key.
func Fingerprint(body string, attrs map[string]string, delay time.Duration) string {
	h := sha256.New()
	var n [20]byte
	write := func(s string) {
		h.Write(strconv.AppendInt(n[:0], int64(len(s)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	write(body)
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		write(k)
		write(attrs[k])
	}
	write(strconv.FormatInt(int64(delay), 10))
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

func newToken() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
