package config

import "time"

// Config is the whole configuration of a fairq process. The YAML keys are
// the contract of DESIGN.md §7; every key can be overridden by an
// environment variable FAIRQ_ + the upper-cased path joined with "_".
type Config struct {
	Listen   string   `yaml:"listen"`
	Admin    Admin    `yaml:"admin"`
	Backend  string   `yaml:"backend"` // memory | sqs
	SQS      SQS      `yaml:"sqs"`
	Redis    Redis    `yaml:"redis"`
	Pool     Pool     `yaml:"pool"`
	Defaults Limits   `yaml:"defaults"`
	Tenants  []Tenant `yaml:"tenants"`
	Worker   Worker   `yaml:"worker"`
	Gateway  Gateway  `yaml:"gateway"`
}

// Admin configures the /admin API.
type Admin struct {
	// TokenSHA256 is the sha256 hex of the admin bearer token; empty
	// disables /admin.
	TokenSHA256 string `yaml:"token_sha256"`
}

// SQS configures the Amazon SQS backend.
type SQS struct {
	Region      string `yaml:"region"`
	Endpoint    string `yaml:"endpoint"` // BaseEndpoint, for emulators; empty uses AWS
	QueuePrefix string `yaml:"queue_prefix"`
}

// Redis configures the optional shared state of a fleet.
type Redis struct {
	Addr     string `yaml:"addr"` // empty: no Redis, every limit is local
	FailOpen bool   `yaml:"fail_open"`
}

// Pool sizes the shuffle-sharded pool of live queues.
type Pool struct {
	Queues    int `yaml:"queues"`
	ShardSize int `yaml:"shard_size"`
}

// Limits are a tenant's limits. A nil field takes the value of Defaults.
type Limits struct {
	IngestRate   *float64 `yaml:"ingest_rate,omitempty"`
	IngestBurst  *int     `yaml:"ingest_burst,omitempty"`
	ProcessRate  *float64 `yaml:"process_rate,omitempty"`
	ProcessBurst *int     `yaml:"process_burst,omitempty"`
	Concurrency  *int     `yaml:"concurrency,omitempty"`
	SoftBacklog  *int     `yaml:"soft_backlog,omitempty"`
	MaxBacklog   *int     `yaml:"max_backlog,omitempty"`
}

// Tenant is a tenant defined in the configuration file.
type Tenant struct {
	ID      string   `yaml:"id"`
	APIKeys []string `yaml:"api_keys"` // "sha256:<hex>"
	Limits  `yaml:",inline"`
}

// Worker configures the consumer daemon, with aws-sqsd's names and defaults.
type Worker struct {
	PushURL                string        `yaml:"push_url"`
	MimeType               string        `yaml:"mime_type"`
	Connections            int           `yaml:"connections"`
	ConnectTimeout         time.Duration `yaml:"connect_timeout"`
	InactivityTimeout      time.Duration `yaml:"inactivity_timeout"`
	VisibilityTimeout      time.Duration `yaml:"visibility_timeout"`
	ErrorVisibilityTimeout time.Duration `yaml:"error_visibility_timeout"`
	MaxRetries             int           `yaml:"max_retries"`
	BacklogAge             time.Duration `yaml:"backlog_age"`
	DropAge                time.Duration `yaml:"drop_age"`
	CronFile               string        `yaml:"cron_file"`
}

// Gateway configures the front door beyond the contract's keys.
type Gateway struct {
	// MaxMessageSize is the largest message accepted, counted as SQS counts
	// it (body plus attribute names, types and values).
	MaxMessageSize int `yaml:"max_message_size"`
	// IdempotencyWindow is how long an Idempotency-Key is remembered.
	IdempotencyWindow time.Duration `yaml:"idempotency_window"`
}
