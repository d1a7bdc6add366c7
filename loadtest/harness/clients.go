package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// ClientsConfig is the load a clients process offers (OfferLoad): each
// tenant's messages at its rate, open loop, from Start for Duration, to
// the gateways' URLs in turn.
type ClientsConfig struct {
	// URLs are the gateways' base URLs.
	URLs []string
	// Keys are the tenants' API keys, by tenant id.
	Keys    map[string]string
	Tenants []Tenant
	Start   time.Time
	// Duration is how long the load lasts from Start.
	Duration time.Duration
}

// clientsEnd is the last line of a clients process's record of sends:
// without it, the record was cut short.
type clientsEnd struct {
	End     bool  `json:"end"`
	Skipped int64 `json:"skipped"`
}

// OfferLoad offers the load of cfg, as the harness's generator does, then
// writes every send to out, one JSON object a line, and a last line
// {"end": true, "skipped": n}: n sends were skipped because too many
// requests were open.
// It is the work of a clients process (command loadtest/clients).
func OfferLoad(ctx context.Context, cfg ClientsConfig, out io.Writer) error {
	if len(cfg.URLs) == 0 {
		return errors.New("clients: no gateway URL")
	}
	sends, skipped := generate(ctx, cfg)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for _, s := range sends {
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	if err := enc.Encode(clientsEnd{End: true, Skipped: skipped}); err != nil {
		return err
	}
	return w.Flush()
}

// generate offers cfg's load from this process and returns every send and
// the number skipped.
func generate(ctx context.Context, cfg ClientsConfig) ([]Send, int64) {
	g := newGenerator(cfg.URLs[0], cfg.Keys, cfg.Tenants)
	g.spread(cfg.URLs)
	g.run(ctx, cfg.Start, cfg.Duration)
	return g.results()
}

// clientsSlack is how long a clients process may take, beyond the load and
// the generator's request timeout, to write its record and exit.
const clientsSlack = 30 * time.Second

// offerFromProcess offers cfg's load from a clients process bin, its
// configuration (API keys included: readable by the owner alone), record
// and output in dir, and returns its sends, the number skipped and the CPU
// time the process used.
//
// The process runs under SCHED_IDLE (`chrt --idle 0`): it gets only the
// cores that no other process wants, so that sending the load takes no
// core from the fleet it measures, as clients on machines of their own
// would not. It still sends on time while the machine has cores to spare
// (Send.Late, Result.Late say whether it did).
func offerFromProcess(ctx context.Context, bin, dir string, cfg ClientsConfig) ([]Send, int64, time.Duration, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, 0, 0, err
	}
	cfgPath, recPath := filepath.Join(dir, "clients.json"), filepath.Join(dir, "sends.jsonl")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		return nil, 0, 0, err
	}
	p, err := startProcess("clients", dir, filepath.Join(dir, "clients.log"), nil, false, nil,
		"chrt", "--idle", "0", bin, "-config", cfgPath, "-out", recPath)
	if err != nil {
		return nil, 0, 0, err
	}
	limit := time.NewTimer(time.Until(cfg.Start.Add(cfg.Duration)) + requestTimeout + clientsSlack)
	defer limit.Stop()
	select {
	case <-p.done:
	case <-limit.C:
		p.kill()
		return nil, 0, 0, fmt.Errorf("clients: not done %v after the load", requestTimeout+clientsSlack)
	case <-ctx.Done():
		p.kill()
		return nil, 0, 0, ctx.Err()
	}
	if p.err != nil {
		return nil, 0, 0, p.exitError()
	}
	cpu, _ := p.cpuTime()
	sends, skipped, err := readSends(recPath)
	return sends, skipped, cpu, err
}

// readSends reads a clients process's record of sends, each line decoded
// once: a send, or the end line, which must be the last.
func readSends(path string) ([]Send, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var sends []Send
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var line struct {
			Send
			clientsEnd
		}
		if err := dec.Decode(&line); errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("%s: cut short, no end line", path)
		} else if err != nil {
			return nil, 0, fmt.Errorf("%s: line %d: %w", path, len(sends)+1, err)
		}
		if line.End {
			if dec.More() {
				return nil, 0, fmt.Errorf("%s: sends after the end line", path)
			}
			return sends, line.Skipped, nil
		}
		sends = append(sends, line.Send)
	}
}
