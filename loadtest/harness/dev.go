package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Dev is one `fairq dev` process, for load tests that drive the front door
// only (the k6 scripts): gateway and worker in one process on the memory
// backend, the worker's built-in handler deleting each message.
type Dev struct {
	// URL is the base URL of its HTTP API.
	URL string
	p   *process
}

// StartDev writes config (a fairq configuration; its listen address is
// replaced) to dir/fairq.yaml, starts `fairq dev` with its log in
// dir/dev.log, and returns once it is ready.
func StartDev(ctx context.Context, bin, dir string, config []byte) (*Dev, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "fairq.yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &system{dir: dir, bin: bin, client: newProbeClient()}
	p, err := s.start(ctx, "fairq dev", "dev.log", addr, "/readyz", "dev", "--config", path)
	if err != nil {
		return nil, err
	}
	return &Dev{URL: "http://" + addr, p: p}, nil
}

// Stop stops the process (SIGTERM) and waits for it.
func (d *Dev) Stop(ctx context.Context) error { return d.p.stop(ctx) }
