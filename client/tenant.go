package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Tenant is the caller's tenant as GET /v1/tenant shows it.
type Tenant struct {
	ID     string
	Limits Limits
	// Backlog is the tenant's messages accepted and not yet ended; nil
	// when the gateway does not count them or cannot reach the count.
	Backlog *int64
	// Admitted and Rejected count messages accepted and refused: by the
	// fleet when the gateways share Redis, else by this gateway since it
	// started.
	Admitted, Rejected int64
}

// Limits are a tenant's limits in force: its own, or the defaults.
type Limits struct {
	IngestRate   float64 `json:"ingest_rate"`   // messages per second admitted at the front door
	IngestBurst  int     `json:"ingest_burst"`  // token bucket size of IngestRate
	ProcessRate  float64 `json:"process_rate"`  // messages per second started by the workers, fleet-wide
	ProcessBurst int     `json:"process_burst"` // token bucket size of ProcessRate
	Concurrency  int     `json:"concurrency"`   // messages in progress at once, fleet-wide
	SoftBacklog  int     `json:"soft_backlog"`  // backlog at which admission starts shrinking
	MaxBacklog   int     `json:"max_backlog"`   // backlog at which admission stops (backlog_full)
	// DropAge, above 0, is the age past which the tenant's messages are
	// dropped unprocessed.
	DropAge time.Duration `json:"-"`
}

type tenantJSON struct {
	ID     string `json:"id"`
	Limits struct {
		Limits
		DropAge string `json:"drop_age"`
	} `json:"limits"`
	Backlog  *int64 `json:"backlog"`
	Admitted int64  `json:"admitted"`
	Rejected int64  `json:"rejected"`
}

// Tenant returns the caller's tenant: its limits, backlog, and admitted and
// refused counts (GET /v1/tenant).
func (c *Client) Tenant(ctx context.Context) (Tenant, error) {
	var t Tenant
	err := c.retry(ctx, func(ctx context.Context) (bool, time.Duration, error) {
		a, err := c.send(ctx, http.MethodGet, "/v1/tenant", nil, "")
		if err != nil {
			return retryableFailure(ctx, err, true), 0, err
		}
		if a.res.StatusCode != http.StatusOK {
			e := errorOf(a.res, a.body)
			return retryableAnswer(e), e.RetryAfter, e
		}
		var tj tenantJSON
		if err := json.Unmarshal(a.body, &tj); err != nil {
			return false, 0, fmt.Errorf("fairq: decoding the tenant: %w", err)
		}
		t = Tenant{ID: tj.ID, Limits: tj.Limits.Limits, Backlog: tj.Backlog, Admitted: tj.Admitted, Rejected: tj.Rejected}
		if tj.Limits.DropAge != "" {
			if t.Limits.DropAge, err = time.ParseDuration(tj.Limits.DropAge); err != nil {
				return false, 0, fmt.Errorf("fairq: the tenant's drop_age %q: %w", tj.Limits.DropAge, err)
			}
		}
		return false, 0, nil
	})
	return t, err
}
