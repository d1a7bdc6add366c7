package config_test

import (
	"errors"
	"fmt"

	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/tenant"
)

func ExampleParse() {
	file := []byte(`
backend: sqs
redis: {addr: "redis:6379"}
tenants:
  - id: acme
    api_keys: ["sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"]
    ingest_rate: 500
`)
	env := map[string]string{"FAIRQ_WORKER_PUSH_URL": "http://app:8000/jobs"}

	cfg, err := config.Parse(file, func(k string) string { return env[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	acme := tenant.Resolve(cfg.Defaults, cfg.Tenants[0].Limits)
	fmt.Println(cfg.Backend, cfg.Redis.Addr, cfg.Worker.PushURL)
	fmt.Println("acme ingest", acme.IngestRate, "concurrency", acme.Concurrency)
	// Output:
	// sqs redis:6379 http://app:8000/jobs
	// acme ingest 500 concurrency 10
}

func ExampleParse_errors() {
	file := []byte(`
worker:
  push_ur: http://app:8000/
  connect_timeout: 5 seconds
  connections: 500
`)
	_, err := config.Parse(file, nil)
	fmt.Println(err)
	fmt.Println(errors.Is(err, config.ErrInvalid))
	// Output:
	// line 3: worker.push_ur: unknown key
	// line 4: worker.connect_timeout: invalid duration "5 seconds": want a Go duration such as 30s or 5m
	// true
}

func ExampleConfig_Validate() {
	cfg := config.Default()
	cfg.Pool.ShardSize = 12
	cfg.Worker.MaxRetries = 0
	fmt.Println(cfg.Validate())
	// Output:
	// pool.shard_size: must be 1–pool.queues (8), got 12
	// worker.max_retries: must be 1–100, got 0
}
