package main

import (
	"log/slog"

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
	if format == "text" {
		return slog.New(slog.NewTextHandler(e.stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(e.stderr, opts))
}
