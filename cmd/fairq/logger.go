package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/config"
)

// newLogger returns the process's logger on stderr. log.format empty means
// text for `fairq dev` (a person reads it) and JSON otherwise (a collector
// does).
func newLogger(e env, cfg config.Config, dev bool) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	format := cfg.Log.Format
	if format == "" {
		format = "json"
		if dev {
			format = "text"
		}
	}
	var logger *slog.Logger
	if format == "text" {
		logger = slog.New(slog.NewTextHandler(e.stderr, opts))
	} else {
		logger = slog.New(slog.NewJSONHandler(e.stderr, opts))
	}
	for _, name := range unknownEnv(e) {
		logger.Warn("unknown FAIRQ_ environment variable ignored: no configuration key has this name", "name", name)
	}
	routeLibraryLogs(logger)
	return logger
}

// unknownEnv returns the FAIRQ_ variables of the environment that name no
// configuration key: a misspelt FAIRQ_REDIS_ADR would otherwise run
// without Redis in silence. Only names are read, never values.
func unknownEnv(e env) []string {
	if e.environ == nil {
		return nil
	}
	known := config.EnvVars()
	var unknown []string
	for _, kv := range e.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.EnvPrefix) || slices.Contains(known, name) || slices.Contains(notConfig, name) {
			continue
		}
		unknown = append(unknown, name)
	}
	slices.Sort(unknown)
	return unknown
}

// notConfig are FAIRQ_ variables that are not configuration keys: the
// tests' switch, and the admin commands' gateway and token.
var notConfig = []string{"FAIRQ_REQUIRE_SERVICES", "FAIRQ_ADMIN_URL", "FAIRQ_ADMIN_TOKEN"}

// redisLog is where go-redis's own log lines go: the logger of the process
// (the last one made, as tests run several in one process), as slog
// records of the "redis" component. go-redis takes one logger for the
// whole process, set once.
var (
	redisLog     atomic.Pointer[slog.Logger]
	redisLogOnce sync.Once
)

// redisLogger forwards go-redis's Printf lines to redisLog.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := redisLog.Load(); l != nil {
		l.LogAttrs(ctx, slog.LevelWarn, strings.TrimSpace(fmt.Sprintf(format, v...)), slog.String("component", "go-redis"))
	}
}

// routeLibraryLogs sends the log lines of the libraries that write their
// own (go-redis) through logger, so that every line fairq writes is one
// structured record. The AWS SDK gets its logger per client (queue.SQS).
func routeLibraryLogs(logger *slog.Logger) {
	redisLog.Store(logger)
	redisLogOnce.Do(func() { redis.SetLogger(redisLogger{}) })
}
