package overview

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairq/fairq/internal/lifecycle"
)

// PublishEvery is how often a Board publishes its process's Report.
const PublishEvery = 2 * time.Second

// staleAfter is the age past which a published Report no longer counts:
// its process stopped publishing (it stopped, or cannot reach Redis).
const staleAfter = 5 * PublishEvery

// forgetAfter is the age past which a reader deletes a Report.
const forgetAfter = time.Minute

// BoardConfig configures a Board.
type BoardConfig struct {
	Redis  redis.UniversalClient // required
	Prefix string                // goes in front of the key ("fairq:")
	// Instance names this process (the worker's fleet id); Role is
	// gateway, worker or dev.
	Instance, Role string
	Recorder       *Recorder // required: what this process publishes
	Logger         *slog.Logger
	Now            func() time.Time
}

// Board is where the processes of a fleet publish their Reports, in
// Redis: one hash, a field per process, rewritten every PublishEvery.
// A reader takes the fresh ones. One key, so one hash slot in a Redis
// Cluster.
type Board struct {
	cfg   BoardConfig
	loops lifecycle.Loops
	down  bool // the last publish failed; only the loop touches it
}

// NewBoard returns a Board; Start publishes.
func NewBoard(cfg BoardConfig) (*Board, error) {
	if cfg.Redis == nil || cfg.Recorder == nil || cfg.Instance == "" {
		return nil, errors.New("overview: a board needs Redis, a Recorder and an instance name")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Board{cfg: cfg}, nil
}

func (b *Board) key() string { return reportsKey(b.cfg.Prefix) }

func reportsKey(prefix string) string { return prefix + "{overview}:reports" }

// Start publishes this process's report now and every PublishEvery.
func (b *Board) Start(ctx context.Context) error {
	lctx, err := b.loops.Start(ctx)
	if err != nil {
		return err
	}
	b.loops.Go(func() {
		t := time.NewTicker(PublishEvery)
		defer t.Stop()
		for {
			b.publish(lctx)
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return nil
}

// Stop ends the publishing and withdraws this process's report.
func (b *Board) Stop(ctx context.Context) error {
	return b.loops.StopThen(ctx, func(ctx context.Context) error {
		if err := b.cfg.Redis.HDel(ctx, b.key(), b.cfg.Instance).Err(); err != nil {
			return fmt.Errorf("overview: withdraw report: %w", err)
		}
		return nil
	})
}

func (b *Board) publish(ctx context.Context) {
	data, err := json.Marshal(b.cfg.Recorder.Report(b.cfg.Instance, b.cfg.Role))
	if err != nil {
		b.cfg.Logger.Error("overview: report not encoded", "err", err)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, PublishEvery)
	defer cancel()
	_, err = b.cfg.Redis.TxPipelined(cctx, func(p redis.Pipeliner) error {
		p.HSet(cctx, b.key(), b.cfg.Instance, data)
		p.PExpire(cctx, b.key(), forgetAfter)
		return nil
	})
	switch {
	case err != nil && ctx.Err() == nil && !b.down:
		b.down = true
		b.cfg.Logger.Warn("overview: report not published; the overview lacks this process until Redis is back", "err", err)
	case err == nil && b.down:
		b.down = false
		b.cfg.Logger.Info("overview: reports published again")
	}
}

// ReadReports returns the fresh Reports of the fleet in Redis, but the
// one of instance skip (the reader's own, which it has first hand), and
// deletes those long stale.
func ReadReports(ctx context.Context, client redis.UniversalClient, prefix, skip string, now time.Time) ([]Report, error) {
	all, err := client.HGetAll(ctx, reportsKey(prefix)).Result()
	if err != nil {
		return nil, fmt.Errorf("overview: read reports: %w", err)
	}
	var out []Report
	var gone []string
	for id, data := range all {
		var r Report
		if err := json.Unmarshal([]byte(data), &r); err != nil || now.Sub(r.At) > forgetAfter {
			gone = append(gone, id)
			continue
		}
		if id == skip || now.Sub(r.At) > staleAfter {
			continue
		}
		out = append(out, r)
	}
	if len(gone) > 0 {
		// Best effort: the next reader tries again.
		_ = client.HDel(ctx, reportsKey(prefix), gone...).Err()
	}
	return out, nil
}
