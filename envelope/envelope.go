package envelope

import (
	"encoding/json"
	"fmt"
	"time"
)

// Attribute names fairq reserves; users have the other seven of SQS's ten.
const (
	AttrTenant      = "fairq-tenant"
	AttrMeta        = "fairq-meta"
	AttrTraceparent = "traceparent"
	// MaxUserAttributes is what SQS's limit of ten leaves to users.
	MaxUserAttributes = 7
)

// Meta is the content of the fairq-meta attribute.
type Meta struct {
	// EnqueuedAt is when the gateway accepted the message, unix ms.
	EnqueuedAt int64 `json:"t"`
	// Attempts counts deliveries before the message's current queue;
	// SQS's receive count restarts on a move, so the total is Attempts plus
	// the current ApproximateReceiveCount.
	Attempts int `json:"a,omitempty"`
	// RequestID is the X-Request-Id of the request that enqueued it.
	RequestID string `json:"r,omitempty"`
	// IdempotencyKey is the caller's Idempotency-Key, if any.
	IdempotencyKey string `json:"k,omitempty"`
	// Origin is the queue the message was first sent to.
	Origin string `json:"q,omitempty"`
	// LastError says why the last attempt failed; set on a dead letter.
	LastError string `json:"e,omitempty"`
}

// Enqueued returns EnqueuedAt as a time.
func (m Meta) Enqueued() time.Time { return time.UnixMilli(m.EnqueuedAt) }

// Encode returns the attribute value.
func (m Meta) Encode() string {
	b, _ := json.Marshal(m) // cannot fail: only strings and numbers
	return string(b)
}

// Decode parses a fairq-meta attribute value.
func Decode(s string) (Meta, error) {
	var m Meta
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return Meta{}, fmt.Errorf("decode %s: %w", AttrMeta, err)
	}
	return m, nil
}
