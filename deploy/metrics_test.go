package deploy

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/backlog"
	"github.com/fairq/fairq/config"
	"github.com/fairq/fairq/consumer"
	"github.com/fairq/fairq/fleet"
	"github.com/fairq/fairq/gateway"
	"github.com/fairq/fairq/internal/degrade"
	"github.com/fairq/fairq/overview"
	"github.com/fairq/fairq/queue"
	"github.com/fairq/fairq/schedule"
	"github.com/fairq/fairq/sharding"
	"github.com/fairq/fairq/spillover"
	"github.com/fairq/fairq/tenant"
	"github.com/fairq/fairq/throttle"
)

// metric is what one exported metric offers a query: its kind and label
// names.
type metric struct {
	histogram bool // also has _bucket (with le), _sum and _count series
	summary   bool // also has _sum and _count series
	labels    []string
}

// descRecorder is a prometheus.Registerer that registers into a real
// registry, so that the components' "already registered" handling works
// as in the binary, and records the metrics each collector describes.
type descRecorder struct {
	*prometheus.Registry
	metrics map[string]metric
	err     error
}

// descFields reads a Desc's name and variable labels from its String form,
// the one place client_golang shows them.
var descFields = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)

func (r *descRecorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	var hist, sum bool
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		hist = true
	case *prometheus.SummaryVec:
		// A lone prometheus.Summary has the method set of a Histogram and
		// cannot be told apart by type; fairq registers none.
		sum = true
	}
	descs := make(chan *prometheus.Desc)
	go func() {
		c.Describe(descs)
		close(descs)
	}()
	for d := range descs {
		m := descFields.FindStringSubmatch(d.String())
		if m == nil {
			r.err = errors.Join(r.err, fmt.Errorf("cannot read the name of %s", d))
			continue
		}
		var names []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				names = append(names, l)
			}
		}
		r.metrics[m[1]] = metric{histogram: hist, summary: sum, labels: names}
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var _ prometheus.Registerer = (*descRecorder)(nil)

// exportedMetrics builds every component of a fairq process as cmd/fairq
// wires them, each given a descRecorder, and returns what they export:
// the names come from the code, not from a list kept by hand. Nothing is
// started; the Redis client is never dialled.
var exportedMetrics = sync.OnceValues(func() (map[string]metric, error) {
	ctx := context.Background()
	rec := &descRecorder{Registry: prometheus.NewRegistry(), metrics: map[string]metric{}}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg := config.Default()
	names := queue.PoolNames(cfg.SQS.QueuePrefix, cfg.Pool.Queues)
	memory := queue.NewMemory(queue.MemoryConfig{})
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	prefix := cfg.SQS.QueuePrefix + ":"
	redisMetrics, err := degrade.NewMetrics(rec)
	if err != nil {
		return nil, err
	}

	var errs []error
	check := func(err error) { errs = append(errs, err) }
	_, err = queue.NewSQS(ctx, queue.SQSConfig{
		Region:      cfg.SQS.Region,
		Endpoint:    "http://127.0.0.1:1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		Registerer:  rec,
	})
	check(err)
	tenants, err := tenant.New(tenant.Config{Defaults: cfg.Defaults, Redis: rdb, Prefix: prefix, Registerer: rec, RedisMetrics: redisMetrics})
	if err != nil {
		return nil, err
	}
	tracker, err := sharding.NewTracker(sharding.Config{
		Reader: memory, Queues: names.Live, ShardSize: cfg.Pool.ShardSize, Redis: rdb, KeyPrefix: prefix, Registerer: rec, RedisMetrics: redisMetrics,
	})
	if err != nil {
		return nil, err
	}
	primary, err := throttle.NewRedisLimiter(throttle.RedisConfig{Client: rdb, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	gwLimiter, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{Primary: primary, RedisMetrics: redisMetrics})
	check(err)
	_, err = gateway.New(gateway.Config{
		Backend: memory, Names: names, Picker: tracker, Tenants: tenants, Limiter: gwLimiter,
		Redis: rdb, RedisPrefix: prefix, RedisMetrics: redisMetrics, Registerer: rec, Gatherer: rec.Registry,
	})
	check(err)
	f, err := fleet.New(fleet.Config{Redis: rdb, Prefix: prefix, Registerer: rec, RedisMetrics: redisMetrics})
	if err != nil {
		return nil, err
	}
	autoscaling, err := fleet.NewAutoscaling(fleet.AutoscalingConfig{
		Depths: memory, Queues: names.Live, SizeFunc: f.Last,
		AcceptableLatency: cfg.Worker.AcceptableLatency, Slots: cfg.Worker.Connections, Registerer: rec,
	})
	if err != nil {
		return nil, err
	}
	rate, err := throttle.NewFailoverLimiter(throttle.FailoverConfig{
		Primary: primary, Component: "worker_ratelimit", RedisMetrics: redisMetrics,
		Fallback: &throttle.ScaledLimiter{Limiter: throttle.NewLocalLimiter(throttle.LocalConfig{}), FactorFunc: func() float64 { return 1 }},
	})
	check(err)
	semaphore, err := throttle.NewRedisSemaphore(throttle.RedisSemaphoreConfig{Client: rdb, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	sem, err := throttle.NewFailoverSemaphore(throttle.FailoverSemaphoreConfig{
		Primary: semaphore, FleetSizeFunc: f.Last, Component: "worker_semaphore", RedisMetrics: redisMetrics,
	})
	check(err)
	limiter, err := spillover.New(spillover.Config{
		Tenants: tenants, Defaults: cfg.Defaults, FleetSizeFunc: f.Last, Rate: rate, Semaphore: sem, Registerer: rec,
	})
	if err != nil {
		return nil, err
	}
	_, err = consumer.New(consumer.Config{
		Backend: memory, Names: names, Handler: consumer.HandlerFunc(func(context.Context, *consumer.Message) error { return nil }),
		Limiter: limiter, ObserveFunc: autoscaling.Observe, Registerer: rec,
	})
	check(err)
	counter, err := backlog.New(backlog.Config{Redis: rdb, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	_, err = backlog.NewTracker(backlog.TrackerConfig{Counter: counter, Depths: memory, Queues: names.Live, Registerer: rec, RedisMetrics: redisMetrics})
	check(err)
	_, err = schedule.New(schedule.Config{Backend: memory, Queue: names.Live[0], Redis: rdb, KeyPrefix: prefix, Registerer: rec})
	check(err)
	_, err = overview.New(overview.Config{Depths: memory, Names: names, Tenants: tenants, Registerer: rec})
	check(err)
	if err := errors.Join(append(errs, rec.err)...); err != nil {
		return nil, err
	}
	return rec.metrics, nil
})

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// queryVars are values for the variables a dashboard's queries use, so
// that they parse as the query Grafana sends would.
type queryVars map[string]string

// checkQuery parses a PromQL expression, with Grafana's variables
// replaced, and checks each series it selects: a metric fairq exports
// (a histogram's _bucket, _sum and _count; a summary's _sum and _count)
// and only labels that metric has.
func checkQuery(exported map[string]metric, expr string, vars queryVars) error {
	q, err := expand(expr, vars)
	if err != nil {
		return err
	}
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		return fmt.Errorf("%q: %w", q, err)
	}
	var errs []error
	for _, matchers := range parser.ExtractSelectors(parsed) {
		errs = append(errs, checkSelector(exported, matchers))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%q: %w", q, err)
	}
	return nil
}

// checkSelector checks one vector selector's metric name and label names.
func checkSelector(exported map[string]metric, matchers []*labels.Matcher) error {
	var name string
	for _, m := range matchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	if name == "" {
		return errors.New("a selector without a metric name: name the metric")
	}
	m, allowed, ok := lookup(exported, name)
	if !ok {
		return fmt.Errorf("fairq exports no metric %s", name)
	}
	for _, matcher := range matchers {
		if matcher.Name != model.MetricNameLabel && !slices.Contains(allowed, matcher.Name) && !slices.Contains(m.labels, matcher.Name) {
			return fmt.Errorf("%s has no label %q (it has %v)", name, matcher.Name, m.labels)
		}
	}
	return nil
}

// lookup finds the metric a series name belongs to, with the labels the
// series has beyond the metric's own.
func lookup(exported map[string]metric, name string) (metric, []string, bool) {
	if m, ok := exported[name]; ok {
		return m, targetLabels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		m, ok := exported[base]
		if !found || !ok {
			continue
		}
		switch {
		case suffix == "_bucket" && m.histogram:
			return m, append([]string{"le"}, targetLabels...), true
		case suffix != "_bucket" && (m.histogram || m.summary):
			return m, targetLabels, true
		}
	}
	return metric{}, nil, false
}

// grafanaVar is a Grafana variable in a query: $name, ${name} or
// ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(?:\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|([A-Za-z0-9_]+))`)

// builtinVars are Grafana's own variables that queries use.
var builtinVars = queryVars{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// expand replaces the variables of expr; a variable it has no value for
// is an error.
func expand(expr string, vars queryVars) (string, error) {
	var unknown []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVar.FindStringSubmatch(v)
		name := m[1] + m[2]
		if value, ok := vars[name]; ok {
			return value
		}
		if value, ok := builtinVars[name]; ok {
			return value
		}
		unknown = append(unknown, v)
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("%q: undefined variables %v", expr, unknown)
	}
	return out, nil
}

// TestExportedMetrics: the components register what the README's metrics
// table promises, so that the name check below has something to hold
// queries to.
func TestExportedMetrics(t *testing.T) {
	exported, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]metric{
		"fairq_admitted_total":                      {labels: []string{"tenant"}},
		"fairq_rejected_total":                      {labels: []string{"tenant", "reason"}},
		"fairq_http_request_duration_seconds":       {histogram: true, labels: []string{"route"}},
		"fairq_worker_age_at_first_attempt_seconds": {histogram: true},
		"fairq_sqs_requests_total":                  {labels: []string{"op"}},
		"fairq_backlog_per_instance":                {},
		"fairq_backlog_target_per_instance":         {},
		"fairq_redis_degraded":                      {labels: []string{"component"}},
		"fairq_worker_tenant_spilled_total":         {labels: []string{"tenant", "reason"}},
		"fairq_cron_leader":                         {},
		"process_cpu_seconds_total":                 {},
	} {
		got, ok := exported[name]
		if !ok {
			t.Errorf("%s is not exported", name)
			continue
		}
		if got.histogram != want.histogram || !slices.Equal(got.labels, want.labels) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}

// TestCheckQuery: the check accepts real queries and reports each kind of
// mistake.
func TestCheckQuery(t *testing.T) {
	exported, err := exportedMetrics()
	if err != nil {
		t.Fatal(err)
	}
	vars := queryVars{"tenant": ".*"}
	tests := []struct {
		name, expr string
		wantErr    string // "" for none
	}{
		{name: "counter", expr: `sum by (reason) (rate(fairq_rejected_total{tenant=~"$tenant"}[$__rate_interval]))`},
		{name: "histogram bucket", expr: `histogram_quantile(0.99, sum by (le, route) (rate(fairq_http_request_duration_seconds_bucket[5m])))`},
		{name: "histogram sum and count", expr: `rate(fairq_worker_processing_seconds_sum[5m]) / rate(fairq_worker_processing_seconds_count[5m])`},
		{name: "target label", expr: `fairq_redis_degraded{instance="a:9090", component="fleet"} > 0`},
		{name: "typo in a metric name", expr: `rate(fairq_admited_total[5m])`, wantErr: "no metric fairq_admited_total"}, //nolint:misspell // the typo is the test
		{name: "syntax error", expr: `sum(rate(fairq_admitted_total[5m])`, wantErr: "unclosed"},
		{name: "label the metric lacks", expr: `fairq_admitted_total{reason="rate_limited"}`, wantErr: `no label "reason"`},
		{name: "bucket of a counter", expr: `fairq_admitted_total_bucket`, wantErr: "no metric fairq_admitted_total_bucket"},
		{name: "le outside a bucket", expr: `fairq_http_request_duration_seconds_count{le="1"}`, wantErr: `no label "le"`},
		{name: "no metric name", expr: `{__name__=~"fairq_.+"}`, wantErr: "without a metric name"},
		{name: "undefined variable", expr: `fairq_admitted_total{tenant=~"$tenat"}`, wantErr: "undefined variables [$tenat]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkQuery(exported, tt.expr, vars)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkQuery: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("checkQuery = %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}
