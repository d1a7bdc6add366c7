package dedupe

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// Outcome is what a claim found.
type Outcome int

// The outcomes of a claim.
const (
	// Run: run the message, then Complete or Release with Claim.Token.
	Run Outcome = iota + 1
	// Duplicate: a copy of the message ran to success within the window.
	Duplicate
	// Running: another worker runs a copy now; Claim.RetryAfter is the
	// rest of its lease.
	Running
)

func (o Outcome) String() string {
	switch o {
	case Run:
		return "run"
	case Duplicate:
		return "duplicate"
	case Running:
		return "running"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Claim is the answer of a store to a claim.
type Claim struct {
	Outcome Outcome
	// Token proves ownership to Complete, Release and Renew (Run).
	Token string
	// RetryAfter is how long the other worker's lease has left (Running).
	RetryAfter time.Duration
}

// Lease is a claim held by a running job, for Renew.
type Lease struct {
	ID, Token string
}

// Defaults.
const (
	WindowDefault   = time.Hour
	LeaseDefault    = 30 * time.Second
	MaxLocalDefault = 100_000
)

// ErrUnavailable wraps the errors of a store that could not be reached.
var ErrUnavailable = errors.New("dedupe store unavailable")

func newToken() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
