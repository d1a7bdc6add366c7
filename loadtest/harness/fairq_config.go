package harness

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fairq/fairq/tenant"
)

// unlimited stands for "no limit" in the modes without worker limits, and
// for the front door's ingest rate in every mode: the experiment compares
// what happens behind the front door.
const unlimited = 1_000_000

// InactivityTimeoutDefault is worker.inactivity_timeout of a run whose
// scenario sets none: long enough for any processing time a scenario
// gives, short enough that a hung push is noticed within a run.
const InactivityTimeoutDefault = 30 * time.Second

// credentials are the secrets of one run: an API key per tenant and the
// admin token, fresh each run and never written to a log.
type credentials struct {
	keys  map[string]string // tenant id → API key
	admin string
}

func newCredentials(tenants []Tenant) credentials {
	c := credentials{keys: make(map[string]string, len(tenants)), admin: "lt_admin_" + randomHex(16)}
	for _, t := range tenants {
		c.keys[t.ID] = "fq_lt_" + randomHex(24)
	}
	return c
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// systemConfig is what the fairq configuration of a run depends on.
type systemConfig struct {
	scenario Scenario
	mode     Mode
	backend  string // memory or sqs
	services Services
	prefix   string // queue prefix and Redis key prefix of the run
	pushURL  string
	creds    credentials
	// gateways is the number of gateway processes on sqs; 0 is one.
	gateways int
}

// yaml returns the fairq configuration file of the run. The listen address
// is set per process through FAIRQ_LISTEN.
func (c systemConfig) yaml() []byte {
	s := c.scenario
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# fairq configuration of a load test run: scenario %s, mode %s (%s).", s.Name, c.mode, c.mode.Title())
	w("# Written by loadtest/harness; the API keys are fresh for the run.")
	w("listen: 127.0.0.1:0")
	sum := sha256.Sum256([]byte(c.creds.admin))
	w("admin: {token_sha256: %s}", hex.EncodeToString(sum[:]))
	w("backend: %s", c.backend)
	w("sqs: {region: us-east-1, endpoint: %q, queue_prefix: %s}", c.services.SQSEndpoint, c.prefix)
	switch {
	case c.backend == backendSQS && len(c.services.RedisCluster) > 0:
		w("redis: {mode: cluster, addrs: [%s], fail_open: %t}", quoted(c.services.RedisCluster), !s.RedisFailClosed)
	case c.backend == backendSQS:
		w("redis: {addr: %q, fail_open: %t}", c.services.RedisAddr, !s.RedisFailClosed)
	}
	queues, shard := c.mode.pool()
	w("pool: {queues: %d, shard_size: %d}", queues, shard)
	rate, burst, conc, backlogAge := float64(unlimited), unlimited, unlimited, time.Duration(0)
	if c.mode.limited() {
		rate, burst, conc, backlogAge = s.Limits.ProcessRate, s.Limits.ProcessBurst, s.Limits.Concurrency, s.BacklogAge
	}
	w("defaults:")
	w("  ingest_rate: %d", unlimited)
	w("  ingest_burst: %d", unlimited)
	w("  process_rate: %s", strconv.FormatFloat(rate, 'g', -1, 64))
	w("  process_burst: %d", burst)
	w("  concurrency: %d", conc)
	w("  soft_backlog: %d", s.SoftBacklog)
	w("  max_backlog: %d", s.MaxBacklog)
	w("tenants:")
	for _, t := range s.Tenants {
		w("  - {id: %s, api_keys: [%q]}", t.ID, tenant.HashKey(c.creds.keys[t.ID]))
	}
	w("worker:")
	w("  push_url: %q", c.pushURL)
	w("  connections: %d", s.Connections)
	w("  connect_timeout: 5s")
	w("  inactivity_timeout: %s", cmp.Or(s.InactivityTimeout, InactivityTimeoutDefault))
	w("  visibility_timeout: %s", s.Visibility)
	w("  error_visibility_timeout: %s", s.ErrorVisibility)
	w("  max_retries: %d", s.MaxRetries)
	w("  backlog_age: %s", backlogAge)
	w("log: {level: warn, format: json}")
	return []byte(b.String())
}

// quoted returns ss as a YAML flow sequence's items: "a", "b".
func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
