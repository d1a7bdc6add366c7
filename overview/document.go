package overview

import (
	"math"
	"time"
)

// Document is GET /admin/v1/overview: what the console shows, one
// document. Times are RFC 3339 UTC with milliseconds; rates are per
// second over the last minute, summed over the fleet.
type Document struct {
	GeneratedAt string      `json:"generated_at"`
	Queues      []QueueRow  `json:"queues"`
	Tenants     []TenantRow `json:"tenants"`
	Workers     []WorkerRow `json:"workers"`
	DLQ         DLQRow      `json:"dlq"`
	Noisy       NoisyRule   `json:"noisy"`
	// Partial is set when part of the document could not be read; the
	// Problems say which.
	Partial  bool     `json:"partial"`
	Problems []string `json:"problems"`
}

// QueueRow is one queue: its latest depth and its recent history.
type QueueRow struct {
	Name       string  `json:"name"`
	Role       string  `json:"role"` // live, overflow, backlog, dlq
	Visible    int     `json:"visible"`
	NotVisible int     `json:"not_visible"`
	Delayed    int     `json:"delayed"`
	SampledAt  *string `json:"sampled_at"`
	// History is the depths of the last History, oldest first, one point
	// per SampleEvery; absent when the request asked for none.
	History []Point `json:"history,omitempty"`
}

// Point is a queue's depth at one instant.
type Point struct {
	At         string `json:"at"`
	Visible    int    `json:"visible"`
	NotVisible int    `json:"not_visible"`
	Delayed    int    `json:"delayed"`
}

// TenantRow is one tenant.
type TenantRow struct {
	ID          string `json:"id"`
	State       string `json:"state"` // active, paused; unknown for a tenant not in the registry
	PauseIngest bool   `json:"pause_ingest"`

	AcceptedPerS float64            `json:"accepted_per_s"`
	RefusedPerS  map[string]float64 `json:"refused_per_s"` // by reason (the problem's code)
	SpilledPerS  map[string]float64 `json:"spilled_per_s"` // by reason: rate, concurrency, unavailable

	// Backlog is the tenant's count of messages not yet ended; null when
	// it is not known.
	Backlog          *int64  `json:"backlog"`
	InFlight         int64   `json:"in_flight"`
	Concurrency      int     `json:"concurrency"`
	ProcessRate      float64 `json:"process_rate"` // jobs ended per second
	ProcessRateLimit float64 `json:"process_rate_limit"`
	// AgeFirstAttemptP95 is the 95th percentile of the age of its messages
	// at their first attempt, in seconds; null without one in the window.
	AgeFirstAttemptP95 *float64 `json:"age_first_attempt_p95_seconds"`

	// InFlightShare and ProcessingShare are the tenant's shares of the
	// fleet's messages in flight and of its processing time.
	InFlightShare   float64 `json:"in_flight_share"`
	ProcessingShare float64 `json:"processing_share"`
	Noisy           bool    `json:"noisy"`
	NoisyReason     string  `json:"noisy_reason,omitempty"`

	// Shard is the live queues of the tenant's shard.
	Shard []string `json:"shard"`
}

// WorkerRow is one worker of the fleet.
type WorkerRow struct {
	ID           string  `json:"id"`
	Slots        int     `json:"slots"`
	SlotsInUse   int     `json:"slots_in_use"`
	MessagesPerS float64 `json:"messages_per_s"`
	// LastHeartbeat is the worker's latest heartbeat in the fleet
	// registry (its latest report, without Redis).
	LastHeartbeat string `json:"last_heartbeat"`
	// Reporting is false for a worker in the registry whose report is
	// missing or stale: its slots and rates are not known.
	Reporting bool `json:"reporting"`
}

// DLQRow is the dead-letter queue at a glance.
type DLQRow struct {
	Visible int `json:"visible"`
}

// NoisyRule is the rule that marks a tenant noisy (see the package
// documentation).
type NoisyRule struct {
	InFlightShare float64 `json:"in_flight_share"`
	MinInFlight   int     `json:"min_in_flight"`
}

// Stamp formats t as the document's times are: RFC 3339, UTC, with
// milliseconds.
func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// round keeps three decimals: rates of a document need no more.
func round(x float64) float64 { return math.Round(x*1000) / 1000 }

func roundAll(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = round(v)
	}
	return out
}
